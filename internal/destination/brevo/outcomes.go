package brevo

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// maxReportBytes bounds one import report read by Outcomes. A report lists
// rows of one import body (under MaxImportBody), so a larger one is not a
// report of ours.
const maxReportBytes = 16 << 20

// Process statuses, as Brevo's current reference lists them (swagger.yaml
// has only the first three).
const (
	statusQueued     = "queued"
	statusInProcess  = "in_process"
	statusCompleted  = "completed"
	statusProcessing = "processing"
	statusFailed     = "failed"
	statusCancelled  = "cancelled"
)

var (
	// ErrProcessNotFound: Brevo does not know the import process (deleted,
	// or a reference of another account). What became of its records is
	// unknown; settle them as in doubt (Verify).
	ErrProcessNotFound = fmt.Errorf("brevo: the import process is not found (%w)", destination.ErrUnknownRef)
	// ErrReport: an import's report of skipped rows could not be read, so
	// which rows were skipped is not known yet.
	ErrReport = errors.New("brevo: an import report could not be read")
)

var _ destination.Async = (*Destination)(nil)

// processDetails is the part of getProcess Outcomes reads. info goes beyond
// swagger.yaml: Brevo's current reference returns it for completed
// IMPORTUSER processes, one CSV report URL (or null) per kind of problem.
type processDetails struct {
	ID     int64  `json:"id"`
	Status string `json:"status"`
	Name   string `json:"name"`
	Info   *struct {
		Import map[string]*string `json:"import"`
	} `json:"info"`
}

// Outcomes reports what became of recs, accepted by the import process ref
// (destination.Async). It asks about that process only, by id or, while the
// destination waits for others too, through one listing of the account's
// newest processes (process, processes.go); it never waits for another
// import.
//
//   - queued, in_process or processing: done is false.
//   - completed: each record the process's reports list (matched by e-mail,
//     case-insensitive, or by ext_id or SMS) is Rejected with the kind of
//     problem as its message (no e-mail address in it); the others are
//     Delivered with ref as Ref. A report is read with the api-key only
//     when it is on Brevo's own origin (the base URL's scheme, host and
//     port); redirects are not followed.
//   - failed or cancelled: every record is NotSent. Brevo documents neither
//     what a failed import applied nor its error details; oncesync takes it
//     that nothing was (as the fake models it), so the records are sent
//     again: if Brevo had applied part of it, those rows are written a
//     second time with the same values.
//
// An unknown process (404) is an error wrapping ErrProcessNotFound; a report
// that cannot be read, one wrapping ErrReport; both are
// destination_unavailable and retryable.
func (d *Destination) Outcomes(ctx context.Context, ref string, recs []destination.Record) ([]destination.Result, bool, error) {
	id, err := strconv.ParseInt(ref, 10, 64)
	if err != nil || id <= 0 {
		return nil, false, failure.New(failure.Internal, "brevo outcomes asked for a process reference that is not a process id")
	}
	p, err := d.process(ctx, id)
	if err != nil {
		return nil, false, err
	}
	switch p.Status {
	case statusQueued, statusInProcess, statusProcessing:
		return nil, false, nil
	case statusFailed, statusCancelled:
		out := make([]destination.Result, len(recs))
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent, Ref: ref}
		}
		return out, true, nil
	case statusCompleted:
	default:
		return nil, false, failure.New(failure.DestinationUnavailable,
			fmt.Sprintf("brevo answered GET /processes/{processId} with an unknown status %q", truncate(redact(p.Status), 40)))
	}
	var idx *rowIndex // built only when a report names rows
	rejected := make(map[int]string)
	if p.Info != nil {
		kinds := make([]string, 0, len(p.Info.Import))
		for k, u := range p.Info.Import {
			if u != nil && strings.TrimSpace(*u) != "" {
				kinds = append(kinds, k)
			}
		}
		slices.Sort(kinds)
		for _, kind := range kinds {
			body, err := d.fetchReport(ctx, strings.TrimSpace(*p.Info.Import[kind]))
			if err != nil {
				return nil, false, err
			}
			if idx == nil {
				idx = newRowIndex(recs)
			}
			if err := idx.reject(body, kind, rejected); err != nil {
				return nil, false, err
			}
		}
	}
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		if msg, ok := rejected[i]; ok {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: msg}
			continue
		}
		out[i] = destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: ref}
	}
	return out, true, nil
}

// getProcess reads GET /processes/{processId}.
func (d *Destination) getProcess(ctx context.Context, id int64) (processDetails, error) {
	var p processDetails
	resp, err := d.do(ctx, request{
		method: http.MethodGet,
		path:   "/processes/" + strconv.FormatInt(id, 10),
		route:  "GET /processes/{processId}",
	})
	if err != nil {
		if apiErr, ok := err.(*APIError); ok && apiErr.says(http.StatusNotFound) { // do returns it bare for the caller to judge
			return p, failure.Wrap(failure.DestinationUnavailable, ErrProcessNotFound, "brevo does not know import process %d", id)
		}
		return p, d.verifyError(err)
	}
	if err := json.Unmarshal(resp.body, &p); err != nil || p.Status == "" {
		return p, failure.Wrap(failure.DestinationUnavailable, errors.New("undecodable process"),
			"brevo answered GET /processes/{processId} with an unexpected body")
	}
	return p, nil
}

// fetchReport reads one import report: GET raw, with the api-key only on
// Brevo's own origin, no redirect followed, at most maxReportBytes. Errors
// never hold the URL (it may carry a signature).
func (d *Destination) fetchReport(ctx context.Context, raw string) ([]byte, error) {
	fail := func(format string, args ...any) error {
		return failure.Wrap(failure.DestinationUnavailable, ErrReport, format, args...)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fail("brevo gave an import report URL that is not an absolute http(s) URL")
	}
	own := d.sameOrigin(u)
	h := http.Header{}
	h.Set("Accept", "text/csv, */*")
	if own {
		// Only Brevo's own origin gets the key; a report elsewhere (a
		// storage service) is fetched without it.
		h.Set("api-key", d.apiKey)
		// Brevo's own origin counts against the account's budget of its
		// routes outside /contacts (brevo.go).
		wait, err := d.others.Reserve(ctx)
		if err == nil {
			err = d.sleep(ctx, wait)
		}
		if err != nil {
			return nil, d.interrupted(ctx, err)
		}
	}
	res, err := d.reports.Do(ctx, apiclient.Request{
		Method: http.MethodGet, URL: u.String(), Route: "GET import report", Header: h, Idempotent: true,
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, d.interrupted(ctx, ctx.Err())
		}
		return nil, failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", ErrReport, err),
			"an import report of brevo could not be fetched")
	}
	if own {
		observeRateLimit(d.others, res)
	}
	if res.Status != http.StatusOK {
		return nil, fail("an import report of brevo answered HTTP %d", res.Status)
	}
	if len(res.Body) > maxReportBytes {
		return nil, fail("an import report of brevo is larger than %d MiB", maxReportBytes>>20)
	}
	return res.Body, nil
}

// sameOrigin reports whether u has the base URL's scheme, host and port.
func (d *Destination) sameOrigin(u *url.URL) bool {
	b, err := url.Parse(d.base)
	if err != nil {
		return false
	}
	return strings.EqualFold(u.Scheme, b.Scheme) && strings.EqualFold(u.Hostname(), b.Hostname()) &&
		portOf(u) == portOf(b)
}

func portOf(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// rowIndex finds the records a report row names.
type rowIndex struct {
	byEmail, byExtID, bySMS map[string][]int
	// noEmail are the records without an e-mail (SMS-only contacts).
	noEmail map[int]bool
}

func newRowIndex(recs []destination.Record) *rowIndex {
	x := &rowIndex{byEmail: map[string][]int{}, byExtID: map[string][]int{}, bySMS: map[string][]int{}, noEmail: map[int]bool{}}
	for i, r := range recs {
		c := parseRecord(r)
		if c.email != "" {
			e := strings.ToLower(c.email)
			x.byEmail[e] = append(x.byEmail[e], i)
		} else {
			x.noEmail[i] = true
		}
		if c.extID != "" {
			x.byExtID[c.extID] = append(x.byExtID[c.extID], i)
		}
		if s := phoneKey(smsText(c.attrs)); s != "" {
			x.bySMS[s] = append(x.bySMS[s], i) // as Brevo reports it (phone.go)
		}
	}
	return x
}

// smsText is the SMS number of attrs (the attribute named in any case) as
// it is sent: a number from a numeric column as its digits (textValue),
// so that a report row naming it finds its record; "" when there is none.
func smsText(attrs map[string]any) string {
	for k, v := range attrs {
		if !strings.EqualFold(k, smsAttribute) {
			continue
		}
		if s, ok := v.(string); ok {
			return s
		}
		if s, ok := textValue(v); ok {
			return s
		}
	}
	return ""
}

// withoutEmail is the records of hits that have no e-mail, or hits when
// none of them lacks one.
func (x *rowIndex) withoutEmail(hits []int) []int {
	var out []int
	for _, i := range hits {
		if x.noEmail[i] {
			out = append(out, i)
		}
	}
	if len(out) == 0 {
		return hits
	}
	return out
}

// reject marks in rejected (record index -> message) every record a report
// of kind names. Brevo does not document a report's columns: it is read as
// CSV (semicolon, comma or tab separated, as its import files are) with a
// header naming EMAIL, EXT_ID, SMS and perhaps a reason; without such a
// header, any cell equal to a record's e-mail address names it.
func (x *rowIndex) reject(report []byte, kind string, rejected map[int]string) error {
	report = bytes.TrimPrefix(report, []byte("\ufeff"))
	cr := csv.NewReader(bytes.NewReader(report))
	cr.Comma = delimiter(report)
	cr.FieldsPerRecord = -1
	cr.LazyQuotes = true
	cr.ReuseRecord = true
	emailCol, extCol, smsCol, reasonCol := -1, -1, -1, -1
	for n := 0; ; n++ {
		row, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return failure.Wrap(failure.DestinationUnavailable, ErrReport, "an import report of brevo is not CSV")
		}
		if n == 0 {
			for i, h := range row {
				switch strings.ToUpper(strings.TrimSpace(h)) {
				case "EMAIL", "EMAIL_ID", "E-MAIL", "EMAIL ADDRESS":
					emailCol = i
				case "EXT_ID":
					extCol = i
				case "SMS":
					smsCol = i
				case "ERROR", "ERRORS", "REASON", "MESSAGE":
					reasonCol = i
				}
			}
			if emailCol >= 0 || extCol >= 0 || smsCol >= 0 {
				continue // a header
			}
		}
		var hits []int
		cell := func(i int) string {
			if i < 0 || i >= len(row) {
				return ""
			}
			return strings.TrimSpace(row[i])
		}
		switch {
		case emailCol >= 0 || extCol >= 0 || smsCol >= 0:
			// The row's most specific identifier names it: the same ext_id or
			// SMS number is also on the record the import applied (that is
			// why this row was skipped).
			if e := cell(emailCol); e != "" {
				hits = x.byEmail[strings.ToLower(e)]
			}
			if e := cell(extCol); e != "" && len(hits) == 0 {
				hits = x.byExtID[e]
			}
			if e := phoneKey(cell(smsCol)); e != "" && len(hits) == 0 {
				hits = x.bySMS[e]
			}
			if emailCol >= 0 && cell(emailCol) == "" {
				// A row without an e-mail is an SMS-only record's: not
				// the contact of the page's that shares its number or
				// ext_id and was applied.
				hits = x.withoutEmail(hits)
			}
		default:
			for i := range row {
				if v := cell(i); strings.Contains(v, "@") {
					hits = append(hits, x.byEmail[strings.ToLower(v)]...)
				}
			}
		}
		for _, i := range hits {
			if _, done := rejected[i]; !done {
				rejected[i] = skipMessage(kind, cell(reasonCol))
			}
		}
	}
}

// delimiter guesses a report's field separator from its first line.
func delimiter(b []byte) rune {
	line := b
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		line = b[:i]
	}
	best, n := ';', bytes.Count(line, []byte{';'})
	for _, c := range []rune{',', '\t'} {
		if m := bytes.Count(line, []byte(string(c))); m > n {
			best, n = c, m
		}
	}
	return best
}

// skipReasons says, per report kind, why the import skipped a row.
var skipReasons = map[string]string{
	"invalid_emails":               "invalid e-mail address",
	"duplicate_contact_id":         "duplicate contact id",
	"duplicate_ext_id":             "its ext_id belongs to another contact",
	"duplicate_email_id":           "its e-mail address is duplicated",
	"duplicate_phone_id":           "its SMS number is duplicated",
	"duplicate_whatsapp_id":        "its WhatsApp number is duplicated",
	"duplicate_landline_number_id": "its landline number is duplicated",
}

// skipMessage is the stored message of a row an import skipped. It holds no
// e-mail address: the report's own words, if any, are redacted.
func skipMessage(kind, reason string) string {
	why, ok := skipReasons[kind]
	if !ok {
		why = "reported as " + truncate(redact(kind), 60)
	}
	msg := "brevo's import skipped this contact: " + why + " (import report " + truncate(redact(kind), 60) + ")"
	if r := truncate(redact(reason), 200); r != "" {
		msg += ": " + r
	}
	return msg
}
