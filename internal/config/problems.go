package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/oncesync/oncesync/internal/failure"
)

// ErrInvalid is matched (errors.Is) by every *Problems.
var ErrInvalid = errors.New("invalid configuration")

// Problem is one thing wrong with a configuration file. Msg never holds a
// secret value.
type Problem struct {
	File   string
	Line   int // 1-based; 0 when unknown
	Column int // 1-based; 0 when unknown
	// Field is the dotted path of the offending key, e.g.
	// syncs[0].source.page_size; empty for file-level problems.
	Field string
	Msg   string
}

// String formats the problem as FILE:LINE: FIELD: MSG.
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Problems is the error Load returns for an invalid configuration: every
// problem found, sorted by position. It matches ErrInvalid and carries the
// failure code invalid_sync_definition (failure.CodeOf).
type Problems struct {
	List []Problem

	// sound is the config LoadSync read when every problem lies in the
	// sync's own entry (SoundTopLevel).
	sound *Config
}

// Concern reports whether a problem's field contains part
// (".heartbeat_url").
func (p *Problems) Concern(part string) bool {
	for _, pr := range p.List {
		if strings.Contains(pr.Field, part) {
			return true
		}
	}
	return false
}

// SoundTopLevel returns, from LoadSync's problems, the config as read when
// every problem lies in the named sync's own entry: its top level (store,
// redis, settings, alerts) is sound, the sync's entry is not. It is for
// recording that the sync could not run, as a failed run the breaker and
// the dead-man see (docs/guide.md#guardrails), never for running it.
func (p *Problems) SoundTopLevel() (*Config, bool) {
	return p.sound, p.sound != nil
}

// Error prints one problem per line.
func (p *Problems) Error() string {
	lines := make([]string, len(p.List))
	for i, pr := range p.List {
		lines[i] = pr.String()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes ErrInvalid and a failure.Error with code
// invalid_sync_definition.
func (p *Problems) Unwrap() []error {
	file := ""
	if len(p.List) > 0 {
		file = p.List[0].File
	}
	return []error{
		ErrInvalid,
		failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("%d problem(s) in %s", len(p.List), file)),
	}
}

func (p *Problems) sort() {
	sort.SliceStable(p.List, func(i, j int) bool {
		a, b := p.List[i], p.List[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Column != b.Column {
			return a.Column < b.Column
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Msg < b.Msg
	})
}
