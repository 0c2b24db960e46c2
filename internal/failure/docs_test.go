package failure_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/oncesync/oncesync/internal/cli"
	"github.com/oncesync/oncesync/internal/failure"
)

const recoveryDoc = "../../" + failure.DocsPath

// docSection is one "## <code>" section of docs/recovery.md.
type docSection struct {
	heading string
	line    int // 1-based line of the heading
	body    string
}

// recoveryGuide is docs/recovery.md split at its "## " headings.
type recoveryGuide struct {
	text     string
	intro    string
	sections []docSection
	anchors  map[string]bool // anchors of every heading (any level)
}

func readGuide(t *testing.T) recoveryGuide {
	t.Helper()
	b, err := os.ReadFile(recoveryDoc)
	if err != nil {
		t.Fatal(err)
	}
	g := recoveryGuide{text: string(b), anchors: map[string]bool{}}
	var cur *docSection
	var intro strings.Builder
	inFence := false
	for i, line := range strings.Split(g.text, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(line, "#") {
			if h := strings.TrimLeft(line, "#"); strings.HasPrefix(h, " ") {
				g.anchors[slug(strings.TrimSpace(h))] = true
			}
		}
		if !inFence && strings.HasPrefix(line, "## ") {
			g.sections = append(g.sections, docSection{heading: strings.TrimPrefix(line, "## "), line: i + 1})
			cur = &g.sections[len(g.sections)-1]
			continue
		}
		if cur == nil {
			intro.WriteString(line + "\n")
		} else {
			cur.body += line + "\n"
		}
	}
	g.intro = intro.String()
	return g
}

// slug is GitHub's heading anchor: lower case, punctuation other than '-' and
// '_' dropped, spaces turned into '-'.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestRecoveryGuideHasOneSectionPerCode(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	order := parseFailurePackage(t).order
	var headings []failure.Code
	seen := map[string]int{}
	for _, s := range g.sections {
		if prev, dup := seen[s.heading]; dup {
			t.Errorf("%s:%d: section %q repeats line %d", recoveryDoc, s.line, s.heading, prev)
		}
		seen[s.heading] = s.line
		if !failure.Known(failure.Code(s.heading)) {
			t.Errorf("%s:%d: section %q does not name a catalog code (only codes get \"## \" headings)", recoveryDoc, s.line, s.heading)
			continue
		}
		headings = append(headings, failure.Code(s.heading))
		if a := failure.Anchor(failure.Code(s.heading)); a != slug(s.heading) {
			t.Errorf("Anchor(%s) = %q, the heading's anchor is %q", s.heading, a, slug(s.heading))
		}
	}
	for _, e := range failure.All() {
		if _, ok := seen[string(e.Code)]; !ok {
			t.Errorf("%s has no \"## %s\" section", recoveryDoc, e.Code)
		}
	}
	if !slices.Equal(headings, order) {
		t.Errorf("sections are in the order\n%v\nwant the catalog's declaration order\n%v", headings, order)
	}
}

func TestRecoveryGuideSectionsMatchCatalog(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	ownerRE := regexp.MustCompile(`(?m)^Owner: \*\*([a-z]+)\*\*`)
	retryRE := regexp.MustCompile(`(?m)Retryable: \*\*([a-z]+)\*\*`)
	for _, s := range g.sections {
		e := failure.Lookup(failure.Code(s.heading))
		if e.Code != failure.Code(s.heading) {
			continue // reported by TestRecoveryGuideHasOneSectionPerCode
		}
		t.Run(s.heading, func(t *testing.T) {
			t.Parallel()
			for _, want := range []string{
				"\n> **What happened:** " + e.WhatHappened + "\n",
				"\n> **Next:** " + e.NextStep + "\n",
			} {
				if !strings.Contains(s.body, want) {
					t.Errorf("%s:%d: section lacks the catalog line %q", recoveryDoc, s.line, strings.TrimSpace(want))
				}
			}
			owners := ownerRE.FindAllStringSubmatch(s.body, -1)
			if len(owners) != 1 || failure.Owner(owners[0][1]) != e.Owner {
				t.Errorf("%s:%d: owner lines %q, want one \"Owner: **%s**\"", recoveryDoc, s.line, owners, e.Owner)
			}
			want := map[bool]string{true: "yes", false: "no"}[e.Retryable]
			retry := retryRE.FindAllStringSubmatch(s.body, -1)
			if len(retry) != 1 || retry[0][1] != want {
				t.Errorf("%s:%d: retryable lines %q, want one \"Retryable: **%s**\"", recoveryDoc, s.line, retry, want)
			}
			for _, part := range []string{"**What to do.**", "**How oncesync reacts.**"} {
				if !strings.Contains(s.body, part) {
					t.Errorf("%s:%d: section lacks %s", recoveryDoc, s.line, part)
				}
			}
		})
	}
}

func TestRecoveryGuideLinksAndExamples(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	links := regexp.MustCompile(`\]\(#([^)]*)\)`).FindAllStringSubmatch(g.text, -1)
	if len(links) < len(failure.All()) {
		t.Errorf("%d in-page links; the index alone should have %d", len(links), len(failure.All()))
	}
	for _, l := range links {
		if !g.anchors[l[1]] {
			t.Errorf("link to #%s: no such heading", l[1])
		}
	}
	// The quick index at the top names every code (sync_paused was missing).
	for _, e := range failure.All() {
		if !strings.Contains(g.intro, "["+string(e.Code)+"](#"+failure.Anchor(e.Code)+") ·") &&
			!strings.Contains(g.intro, "["+string(e.Code)+"](#"+failure.Anchor(e.Code)+")\n\n") {
			t.Errorf("the quick index lacks [%s](#%s)", e.Code, failure.Anchor(e.Code))
		}
	}
	// Example failure lines are what LastLine prints.
	examples := 0
	for _, line := range strings.Split(g.text, "\n") {
		if !strings.HasPrefix(line, "failed: ") {
			continue
		}
		examples++
		code, _, _ := strings.Cut(strings.TrimPrefix(line, "failed: "), ":")
		if want := failure.LastLine(failure.New(failure.Code(code), "")); line != want || !failure.Known(failure.Code(code)) {
			t.Errorf("example line\n%s\nbut LastLine prints\n%s", line, want)
		}
	}
	if examples == 0 {
		t.Error("the guide shows no example failure line")
	}
	for _, want := range []string{
		"`failed: <code>: <what happened> Next: <next step> (owner: <owner>)`",
		"| `0`  |", "| `1`  |", "| `2`  |", "| `3`  |",
	} {
		if !strings.Contains(g.intro, want) {
			t.Errorf("the introduction lacks %q", want)
		}
	}
}

// userDocs are the pages a new user follows to the letter, besides
// docs/recovery.md.
var userDocs = []string{"../../README.md", "../../docs/guide.md", "../../docs/config.md"}

// commandLines are the oncesync command lines text shows: the lines of its
// ```sh blocks that start with oncesync (or `go run ./cmd/oncesync`), and
// every `oncesync ...` code span.
func commandLines(text string) []string {
	var lines []string
	inShell := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		trimmed = strings.TrimPrefix(trimmed, "go run ./cmd/")
		switch {
		case strings.HasPrefix(trimmed, "```"):
			inShell = trimmed == "```sh"
		case inShell && strings.HasPrefix(trimmed, "oncesync "):
			lines = append(lines, trimmed)
		}
	}
	spans := regexp.MustCompile("`(oncesync [^`]*)`")
	for _, m := range spans.FindAllStringSubmatch(text, -1) {
		// A span may wrap; Markdown reads its line break as a space.
		lines = append(lines, strings.ReplaceAll(m[1], "\n", " "))
	}
	return lines
}

var (
	optionalRE = regexp.MustCompile(`\s*\[[^\]]*\]`)               // [--rejected\|--in-doubt]
	choiceRE   = regexp.MustCompile(`\(([^()|]*?)\s*\\\|[^()]*\)`) // (--snapshot H \| --inputs F)
)

// synopsisLines turns a synopsis of the guide's command table into the
// command lines it stands for: optional [parts] dropped, the first of
// (A \| B), every command of `list\|requeue` and `pause/resume`.
func synopsisLines(line string) []string {
	line = optionalRE.ReplaceAllString(line, "")
	line = choiceRE.ReplaceAllString(line, "$1")
	words := strings.Fields(line)
	for i, w := range words {
		if i > 2 || strings.HasPrefix(w, "-") {
			break
		}
		var alts []string
		switch {
		case strings.Contains(w, `\|`):
			alts = strings.Split(w, `\|`)
		case i == 1 && strings.Contains(w, "/"):
			alts = strings.Split(w, "/")
		default:
			continue
		}
		var out []string
		for _, a := range alts {
			out = append(out, synopsisLines(strings.Join(slices.Concat(words[:i], []string{a}, words[i+1:]), " "))...)
		}
		return out
	}
	return []string{line}
}

// TestDocumentedCommandsExist runs every oncesync command line that the
// recovery guide, a catalog next step, the README, the guide or the config
// reference shows, with --help: an unknown command or flag makes the command
// line fail. A new user runs them as written.
func TestDocumentedCommandsExist(t *testing.T) {
	t.Parallel()
	g := readGuide(t)
	type docLine struct{ doc, line string }
	var lines []docLine
	for _, l := range commandLines(g.text) {
		lines = append(lines, docLine{recoveryDoc, l})
	}
	spans := regexp.MustCompile("`(oncesync [^`]*)`")
	for _, e := range failure.All() {
		for _, m := range spans.FindAllStringSubmatch(e.NextStep, -1) {
			lines = append(lines, docLine{"the catalog's " + string(e.Code), m[1]})
		}
	}
	perDoc := map[string]int{}
	for _, doc := range userDocs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range commandLines(string(b)) {
			for _, s := range synopsisLines(l) {
				lines = append(lines, docLine{doc, s})
				perDoc[doc]++
			}
		}
	}
	if len(lines) < 60 || perDoc[userDocs[0]] < 10 || perDoc[userDocs[1]] < 20 {
		t.Fatalf("found only %d command lines (%v): %q", len(lines), perDoc, lines)
	}
	slices.SortFunc(lines, func(a, b docLine) int { return strings.Compare(a.line, b.line) })
	lines = slices.CompactFunc(lines, func(a, b docLine) bool { return a.line == b.line })
	for _, l := range lines {
		args, err := shellWords(l.line)
		if err != nil {
			t.Errorf("%s: %q: %v", l.doc, l.line, err)
			continue
		}
		args = append(args[1:], "--help")
		if len(args) > 1 && strings.HasPrefix(args[len(args)-2], "--") {
			// A flag named without its value ("`--conflict-answer` picks
			// ..."): give it one, or it would take --help for it.
			args = slices.Insert(args, len(args)-1, "VALUE")
		}
		var out bytes.Buffer
		code := cli.Main(context.Background(), args, cli.Env{
			Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false },
		})
		if code != cli.ExitOK {
			t.Errorf("%s: documented command %q does not exist (exit %d): %s", l.doc, l.line, code, strings.TrimSpace(out.String()))
		}
	}
}

// TestGuideListsEveryCommand: every command `oncesync --help` lists has a
// row in docs/guide.md#commands, and every row names a command that exists.
func TestGuideListsEveryCommand(t *testing.T) {
	t.Parallel()
	guide, err := os.ReadFile("../../docs/guide.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(guide), "\n## Commands\n")
	if !ok {
		t.Fatal("docs/guide.md has no ## Commands section")
	}
	table, _, _ = strings.Cut(table, "\n\n`oncesync run` options")
	var out bytes.Buffer
	if code := cli.Main(context.Background(), []string{"--help"}, cli.Env{Stdout: &out, Stderr: &out,
		LookupEnv: func(string) (string, bool) { return "", false }}); code != cli.ExitOK {
		t.Fatalf("oncesync --help: exit %d: %s", code, out.String())
	}
	_, cmds, _ := strings.Cut(out.String(), "Available Commands:\n")
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	n := 0
	for _, line := range strings.Split(cmds, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		if name == "" || name == "help" || name == "completion" {
			continue
		}
		n++
		if !regexp.MustCompile("\\| `oncesync [a-z/]*\\b" + regexp.QuoteMeta(name) + "\\b").MatchString(table) {
			t.Errorf("docs/guide.md#commands has no row for `oncesync %s`", name)
		}
	}
	if n < 15 {
		t.Fatalf("read only %d commands from oncesync --help:\n%s", n, out.String())
	}
}

// shellWords splits a documented command line: words, "double" and 'single'
// quotes, and a trailing "# comment".
func shellWords(s string) ([]string, error) {
	var (
		words []string
		cur   strings.Builder
		quote rune
		in    bool
	)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == '#' && !in:
			return words, nil
		case r == ' ' || r == '\t':
			if in {
				words = append(words, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("unbalanced %c", quote)
	}
	if in {
		words = append(words, cur.String())
	}
	return words, nil
}
