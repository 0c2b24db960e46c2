package main

import (
	"fmt"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// want is what one source record must look like at the destination: every
// mapped field, from the source's current values.
type want struct {
	Email string
	First string // FIRSTNAME
	ExtID string // "" when ext_id is not mapped
	// Flipped: the record changed and changed back while runs went on, so a
	// wrong value here is most likely a lost update (docs/guide.md#what-a-run-does).
	Flipped bool
	// Label names the record in a problem line (sync and identity, no
	// e-mail address).
	Label string
}

// valueCounts is the value checker's verdict over some records: each is at
// the destination with all its mapped values (delivered), there with some
// other value (wrong), or absent (lost).
type valueCounts struct {
	Records, Delivered, Lost, Wrong int64
	// WrongFlipped are the wrong ones among the records that changed and
	// changed back.
	WrongFlipped int64
	// Examples are a few wrong records, for the notes.
	Examples []string
}

// maxExamples bounds the wrong records a verdict names.
const maxExamples = 5

// compare judges one record against the fake.
func (v *valueCounts) compare(fake *fakebrevo.Server, w want) {
	v.Records++
	c, ok := fake.Contact(w.Email)
	if !ok {
		v.Lost++
		return
	}
	diff := ""
	got := "" // no value: what a cleared (NULL) first_name must leave
	if a, ok := c.Attributes["FIRSTNAME"]; ok && a != nil {
		got = fmt.Sprint(a)
	}
	if got != w.First {
		diff = fmt.Sprintf("FIRSTNAME %q, want %q", got, w.First)
	} else if w.ExtID != "" && c.ExtID != w.ExtID {
		diff = fmt.Sprintf("ext_id %q, want %q", c.ExtID, w.ExtID)
	}
	if diff == "" {
		v.Delivered++
		return
	}
	v.Wrong++
	if w.Flipped {
		v.WrongFlipped++
	}
	if len(v.Examples) < maxExamples {
		v.Examples = append(v.Examples, w.Label+": "+diff)
	}
}

// add sums o into v.
func (v *valueCounts) add(o valueCounts) {
	v.Records += o.Records
	v.Delivered += o.Delivered
	v.Lost += o.Lost
	v.Wrong += o.Wrong
	v.WrongFlipped += o.WrongFlipped
	for _, ex := range o.Examples {
		if len(v.Examples) < maxExamples {
			v.Examples = append(v.Examples, ex)
		}
	}
}

// fill writes the verdict into row (records, delivered, lost, wrong values)
// and says in its notes which records were wrong.
func (v valueCounts) fill(row *Row) {
	row.Records, row.Delivered, row.Lost, row.WrongValues = v.Records, v.Delivered, v.Lost, v.Wrong
	if v.Wrong > 0 {
		row.notef("wrong final values: %d records (%d of them changed and changed back while runs went on), e.g. %v",
			v.Wrong, v.WrongFlipped, v.Examples)
	}
}
