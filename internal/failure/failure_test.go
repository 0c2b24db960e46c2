package failure_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
)

// specOwners is docs/recovery.md's list of codes with their owners where the SPEC
// names one, and docs/guide.md#running-on-a-schedule-serve-and-worker's split of transient (retryable) and permanent
// failures. Every code of the SPEC must stay in the catalog.
var specCodes = []struct {
	code      failure.Code
	owner     failure.Owner // "" when the SPEC leaves it open
	retryable bool
}{
	{failure.LeaseLost, failure.OwnerOperator, true},
	{failure.AlreadyRunning, "", false}, // docs/guide.md#what-a-run-does: "Do not retry"
	{failure.Interrupted, failure.OwnerOperator, true},
	{failure.DestinationAuth, failure.OwnerYou, false},
	{failure.DestinationRejectedRecords, failure.OwnerYou, false},
	{failure.DestinationUnavailable, failure.OwnerOperator, true},
	{failure.DestinationRateLimited, failure.OwnerOperator, true},
	{failure.SourceUnavailable, "", true},
	{failure.SourceQueryInvalid, failure.OwnerYou, false},
	{failure.InvalidSyncDefinition, failure.OwnerYou, false},
	{failure.CursorOlderThanLedger, failure.OwnerYou, false},
	{failure.SourceChangedDuringRun, failure.OwnerYou, false},
	{failure.RecordsInDoubt, failure.OwnerYou, false},
	{failure.MirrorRemovalsRefused, failure.OwnerYou, false},
	{failure.StoreUnavailable, failure.OwnerOperator, true},
	{failure.CircuitBreakerTripped, failure.OwnerYou, false},
}

// contractSentences are printed verbatim by the run loop (docs/guide.md#what-a-run-does); the
// already-running sentence has no final period in the SPEC.
var contractSentences = map[failure.Code]string{
	failure.LeaseLost:      "The run lost its slot part-way through and stopped to avoid writing twice.",
	failure.AlreadyRunning: "Another run of this sync was already in progress",
}

func TestCatalogMatchesSpec(t *testing.T) {
	t.Parallel()
	for _, tc := range specCodes {
		t.Run(string(tc.code), func(t *testing.T) {
			t.Parallel()
			if !failure.Known(tc.code) {
				t.Fatalf("docs/recovery.md code %s is not in the catalog", tc.code)
			}
			e := failure.Lookup(tc.code)
			if tc.owner != "" && e.Owner != tc.owner {
				t.Errorf("owner %q, SPEC says %q", e.Owner, tc.owner)
			}
			if e.Retryable != tc.retryable {
				t.Errorf("retryable %v, docs/guide.md#running-on-a-schedule-serve-and-worker says %v", e.Retryable, tc.retryable)
			}
		})
	}
	for code, want := range contractSentences {
		if got := failure.Lookup(code).WhatHappened; got != want {
			t.Errorf("%s: sentence %q, docs/guide.md#what-a-run-does says %q", code, got, want)
		}
	}
}

var codeRE = regexp.MustCompile(`^[a-z]+(_[a-z]+)*$`)

func TestCatalogEntries(t *testing.T) {
	t.Parallel()
	all := failure.All()
	if len(all) < len(specCodes)+1 { // + internal_error
		t.Fatalf("catalog has %d entries, want at least %d", len(all), len(specCodes)+1)
	}
	if !slices.IsSortedFunc(all, func(a, b failure.Entry) int { return strings.Compare(string(a.Code), string(b.Code)) }) {
		t.Error("All is not sorted by code")
	}
	for _, e := range all {
		t.Run(string(e.Code), func(t *testing.T) {
			t.Parallel()
			if !codeRE.MatchString(string(e.Code)) {
				t.Errorf("code %q is not lower_snake_case", e.Code)
			}
			if got := failure.Lookup(e.Code); got != e {
				t.Errorf("Lookup(%s) = %+v, All has %+v", e.Code, got, e)
			}
			if e.Owner != failure.OwnerYou && e.Owner != failure.OwnerOperator {
				t.Errorf("owner %q is neither %q nor %q", e.Owner, failure.OwnerYou, failure.OwnerOperator)
			}
			for name, s := range map[string]string{"WhatHappened": e.WhatHappened, "NextStep": e.NextStep} {
				if strings.TrimSpace(s) != s || s == "" {
					t.Errorf("%s %q is empty or has surrounding space", name, s)
				}
				if strings.ContainsAny(s, "\n\r\t") || strings.Contains(s, "  ") {
					t.Errorf("%s %q is not one plain line", name, s)
				}
				if strings.Count(s, "`")%2 != 0 {
					t.Errorf("%s %q has an unbalanced backquote", name, s)
				}
				if _, contract := contractSentences[e.Code]; contract && name == "WhatHappened" {
					continue // checked verbatim against the SPEC
				}
				if !strings.HasSuffix(s, ".") {
					t.Errorf("%s %q does not end with a period", name, s)
				}
			}
		})
	}
}

func TestLookupUnknown(t *testing.T) {
	t.Parallel()
	for _, c := range []failure.Code{"", "no_such_code", "LEASE_LOST"} {
		if failure.Known(c) {
			t.Errorf("Known(%q) = true", c)
		}
		if got := failure.Lookup(c).Code; got != failure.Internal {
			t.Errorf("Lookup(%q).Code = %s, want %s", c, got, failure.Internal)
		}
	}
}

func TestLastLine(t *testing.T) {
	t.Parallel()
	for _, e := range failure.All() {
		t.Run(string(e.Code), func(t *testing.T) {
			t.Parallel()
			errs := []error{
				failure.New(e.Code, ""),
				failure.New(e.Code, "a detail that LastLine leaves to the detail line"),
				fmt.Errorf("outer: %w", failure.Wrap(e.Code, errors.New("cause"), "detail %d", 7)),
			}
			want := "failed: " + string(e.Code) + ": " + e.WhatHappened + " Next: " + e.NextStep + " (owner: " + string(e.Owner) + ")"
			for _, err := range errs {
				if got := failure.LastLine(err); got != want {
					t.Errorf("LastLine(%v)\n got %q\nwant %q", err, got, want)
				}
			}
		})
	}
	t.Run("exact text", func(t *testing.T) {
		t.Parallel()
		got := failure.LastLine(failure.New(failure.LeaseLost, ""))
		want := "failed: lease_lost: The run lost its slot part-way through and stopped to avoid writing twice. Next: " +
			failure.Lookup(failure.LeaseLost).NextStep + " (owner: operator)"
		if got != want {
			t.Errorf("got %q\nwant %q", got, want)
		}
	})
	t.Run("uncoded error", func(t *testing.T) {
		t.Parallel()
		got := failure.LastLine(errors.New("boom"))
		if !strings.HasPrefix(got, "failed: internal_error: ") || strings.Contains(got, "boom") {
			t.Errorf("LastLine of a plain error = %q, want internal_error without the error text", got)
		}
	})
}

func TestCodeOfAndRetryable(t *testing.T) {
	t.Parallel()
	cause := errors.New("connection refused")
	tests := []struct {
		name      string
		err       error
		code      failure.Code
		retryable bool
	}{
		{"New", failure.New(failure.DestinationAuth, "401"), failure.DestinationAuth, false},
		{"Wrap", failure.Wrap(failure.StoreUnavailable, cause, "open %s", "db"), failure.StoreUnavailable, true},
		{"wrapped by fmt", fmt.Errorf("run 3: %w", failure.New(failure.SourceQueryInvalid, "line 4")), failure.SourceQueryInvalid, false},
		{"outermost failure wins", failure.Wrap(failure.LeaseLost, failure.New(failure.StoreUnavailable, "x"), "y"), failure.LeaseLost, true},
		{"joined", errors.Join(errors.New("a"), failure.New(failure.DestinationUnavailable, "503")), failure.DestinationUnavailable, true},
		{"plain error", cause, failure.Internal, true},
		{"nil", nil, failure.Internal, true},
		{"unknown code", failure.New("made_up", ""), "made_up", true}, // CodeOf keeps it; Lookup maps it to internal_error
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := failure.CodeOf(tc.err); got != tc.code {
				t.Errorf("CodeOf = %s, want %s", got, tc.code)
			}
			if got := failure.Retryable(tc.err); got != tc.retryable {
				t.Errorf("Retryable = %v, want %v", got, tc.retryable)
			}
		})
	}
}

func TestErrorTextAndUnwrap(t *testing.T) {
	t.Parallel()
	cause := errors.New("disk full")
	tests := []struct {
		name   string
		err    *failure.Error
		text   string
		unwrap error
	}{
		{"code only", failure.New(failure.Interrupted, ""), "interrupted", nil},
		{"detail", failure.New(failure.SourceUnavailable, "contacts.csv: no such file"), "source_unavailable: contacts.csv: no such file", nil},
		{"wrap", failure.Wrap(failure.StoreUnavailable, cause, "could not %s", "save the cursor"), "store_unavailable: could not save the cursor: disk full", cause},
		{"wrap, detail is the cause's text", failure.Wrap(failure.SourceQueryInvalid, cause, "%s", cause.Error()), "source_query_invalid: disk full", cause},
		{"wrap, no detail", failure.Wrap(failure.Internal, cause, ""), "internal_error: disk full", cause},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.err.Error(); got != tc.text {
				t.Errorf("Error() = %q, want %q", got, tc.text)
			}
			if got := tc.err.Unwrap(); got != tc.unwrap {
				t.Errorf("Unwrap() = %v, want %v", got, tc.unwrap)
			}
			if tc.unwrap != nil && !errors.Is(fmt.Errorf("x: %w", tc.err), tc.unwrap) {
				t.Error("errors.Is does not reach the cause through the failure")
			}
			var fe *failure.Error
			if !errors.As(fmt.Errorf("x: %w", tc.err), &fe) || fe != tc.err {
				t.Error("errors.As does not find the failure")
			}
		})
	}
	t.Run("sentinel through Wrap", func(t *testing.T) {
		t.Parallel()
		sentinel := errors.New("sentinel")
		err := failure.Wrap(failure.LeaseLost, fmt.Errorf("renew: %w", sentinel), "lost")
		if !errors.Is(err, sentinel) {
			t.Error("errors.Is(Wrap(..., %w sentinel), sentinel) = false")
		}
		if err.Detail != "lost" || err.Code != failure.LeaseLost {
			t.Errorf("fields %+v", err)
		}
	})
}

func TestAnchorAndDocsURL(t *testing.T) {
	t.Parallel()
	for _, e := range failure.All() {
		if got := failure.Anchor(e.Code); got != string(e.Code) {
			t.Errorf("Anchor(%s) = %q", e.Code, got)
		}
	}
	tests := []struct {
		base string
		code failure.Code
		want string
	}{
		{"", failure.LeaseLost, "docs/recovery.md#lease_lost"},
		{"https://example.com/docs/recovery.md", failure.DestinationAuth, "https://example.com/docs/recovery.md#destination_auth"},
		{"https://example.com/r.md#old", failure.StoreUnavailable, "https://example.com/r.md#store_unavailable"},
		{"", "no_such_code", "docs/recovery.md#internal_error"},
	}
	for _, tc := range tests {
		if got := failure.DocsURL(tc.base, tc.code); got != tc.want {
			t.Errorf("DocsURL(%q, %q) = %q, want %q", tc.base, tc.code, got, tc.want)
		}
	}
}

// TestEveryCodeUsedInSourceIsCataloged walks the repository's Go source
// (tests excluded) and checks every use of the failure package that names a
// code: constants (failure.X), failure.Code("...") conversions, and string
// literals given as a code to New, Wrap or a failure.Error literal.
func TestEveryCodeUsedInSourceIsCataloged(t *testing.T) {
	t.Parallel()
	pkg := parseFailurePackage(t)
	var (
		files, importers int
		used             = map[failure.Code]bool{}
	)
	for _, root := range []string{"../../internal", "../../cmd"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			files++
			res, err := checkFile(path, nil, pkg)
			if err != nil {
				return err
			}
			if res.imports {
				importers++
			}
			for _, p := range res.problems {
				t.Error(p)
			}
			for c := range res.used {
				used[c] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The walk must have seen the code producers, or it checked nothing.
	if files < 20 || importers < 5 || len(used) < 8 {
		t.Fatalf("walked %d files, %d import the failure package, %d codes used: the walk missed the source", files, importers, len(used))
	}
	for _, e := range failure.All() {
		if !used[e.Code] {
			t.Logf("catalog code %s is not produced by any code path yet", e.Code)
		}
	}
}

// TestCheckFile proves the source check catches what it is meant to.
func TestCheckFile(t *testing.T) {
	t.Parallel()
	pkg := parseFailurePackage(t)
	const header = "package x\nimport %s \"github.com/oncesync/oncesync/internal/failure\"\n"
	tests := []struct {
		name     string
		alias    string
		body     string
		problems int
		used     []failure.Code
	}{
		{"constant", "", `var e = failure.New(failure.LeaseLost, "")`, 0, []failure.Code{failure.LeaseLost}},
		{"cataloged literal conversion", "", `var c = failure.Code("store_unavailable")`, 0, []failure.Code{failure.StoreUnavailable}},
		{"uncataloged literal conversion", "", `var c = failure.Code("disk_full")`, 1, nil},
		{"uncataloged literal to New", "", `var e = failure.New("disk_full", "x")`, 1, nil},
		{"uncataloged literal to Wrap", "", `var e = failure.Wrap("disk_full", nil, "x")`, 1, nil},
		{"uncataloged literal in an Error literal", "", `var e = &failure.Error{Code: "disk_full"}`, 1, nil},
		{"uncataloged conversion in an Error literal", "", `var e = failure.Error{Code: failure.Code("nope"), Detail: "d"}`, 1, nil},
		{"unknown identifier", "", `var c = failure.DiskFull`, 1, nil},
		{"dynamic conversion is allowed", "", `func f(s string) failure.Code { return failure.Code(s) }`, 0, nil},
		{"aliased import", "fl", `var e = fl.New("disk_full", "")`, 1, nil},
		{"aliased import, constant", "fl", `var e = fl.Wrap(fl.DestinationAuth, nil, "")`, 0, []failure.Code{failure.DestinationAuth}},
		{"other packages are ignored", "_", `var failure struct{ X string }; var c = failure.X`, 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := fmt.Sprintf(header, tc.alias) + tc.body + "\n"
			res, err := checkFile("x.go", []byte(src), pkg)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.problems) != tc.problems {
				t.Errorf("problems %q, want %d", res.problems, tc.problems)
			}
			for _, c := range tc.used {
				if !res.used[c] {
					t.Errorf("use of %s not seen (used: %v)", c, res.used)
				}
			}
		})
	}
}

const failureImportPath = "github.com/oncesync/oncesync/internal/failure"

// failurePkg is what the source check knows of package failure, read from its
// own (non-test) source.
type failurePkg struct {
	exported map[string]bool         // top-level exported identifiers
	consts   map[string]failure.Code // Code constants by name
	order    []failure.Code          // Code constants in declaration order
}

func parseFailurePackage(t *testing.T) failurePkg {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	pkg := failurePkg{exported: map[string]bool{}, consts: map[string]failure.Code{}}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					pkg.exported[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						pkg.exported[s.Name.Name] = s.Name.IsExported()
					case *ast.ValueSpec:
						typ, _ := s.Type.(*ast.Ident)
						for i, n := range s.Names {
							if n.IsExported() {
								pkg.exported[n.Name] = true
							}
							if d.Tok != token.CONST || typ == nil || typ.Name != "Code" || i >= len(s.Values) {
								continue
							}
							lit, ok := s.Values[i].(*ast.BasicLit)
							if !ok || lit.Kind != token.STRING {
								t.Fatalf("%s: Code constant %s is not a string literal", name, n.Name)
							}
							v, err := strconv.Unquote(lit.Value)
							if err != nil {
								t.Fatal(err)
							}
							pkg.consts[n.Name] = failure.Code(v)
							pkg.order = append(pkg.order, failure.Code(v))
						}
					}
				}
			}
		}
	}
	// Every declared code is in the catalog and every catalog entry has a constant.
	if len(pkg.order) != len(failure.All()) {
		t.Fatalf("failure.go declares %d Code constants, the catalog has %d entries", len(pkg.order), len(failure.All()))
	}
	for name, c := range pkg.consts {
		if !failure.Known(c) {
			t.Fatalf("constant %s = %q is not in the catalog", name, c)
		}
	}
	return pkg
}

type checkResult struct {
	imports  bool // the file imports package failure
	problems []string
	used     map[failure.Code]bool
}

// codeParams are the package's functions taking a Code, by argument index.
var codeParams = map[string]int{"New": 0, "Wrap": 0, "Lookup": 0, "Anchor": 0, "DocsURL": 1}

// checkFile checks one Go file (src, or the file at path when src is nil).
func checkFile(path string, src []byte, pkg failurePkg) (checkResult, error) {
	res := checkResult{used: map[failure.Code]bool{}}
	if src == nil {
		var err error
		if src, err = os.ReadFile(path); err != nil {
			return res, err
		}
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
	if err != nil {
		return res, err
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == failureImportPath {
			local = "failure"
			if im.Name != nil {
				local = im.Name.Name
			}
		}
	}
	if local == "" || local == "_" || local == "." {
		return res, nil
	}
	res.imports = true
	// sel reports whether e is local.<name> and returns name. (A variable
	// shadowing the package name would be misread; the repository has none.)
	sel := func(e ast.Expr) (string, bool) {
		s, ok := e.(*ast.SelectorExpr)
		if !ok {
			return "", false
		}
		x, ok := s.X.(*ast.Ident)
		if !ok || x.Name != local {
			return "", false
		}
		return s.Sel.Name, true
	}
	report := func(n ast.Node, format string, args ...any) {
		res.problems = append(res.problems, fmt.Sprintf("%s: ", fset.Position(n.Pos()))+fmt.Sprintf(format, args...))
	}
	literal := func(e ast.Expr, what string) {
		lit, ok := e.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			return
		}
		if !failure.Known(failure.Code(v)) {
			report(lit, "%s %q is not a catalog code (add it to internal/failure and docs/recovery.md)", what, v)
			return
		}
		res.used[failure.Code(v)] = true
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			name, ok := sel(n)
			if !ok {
				return true
			}
			if !pkg.exported[name] {
				report(n, "%s.%s is not declared by package failure", local, name)
			} else if c, isCode := pkg.consts[name]; isCode {
				res.used[c] = true
			}
		case *ast.CallExpr:
			name, ok := sel(n.Fun)
			if !ok {
				return true
			}
			if name == "Code" && len(n.Args) == 1 {
				literal(n.Args[0], "failure.Code conversion of")
			} else if i, takesCode := codeParams[name]; takesCode && i < len(n.Args) {
				literal(n.Args[i], "code argument")
			}
		case *ast.CompositeLit:
			if name, ok := sel(n.Type); !ok || name != "Error" {
				return true
			}
			for i, el := range n.Elts {
				if kv, ok := el.(*ast.KeyValueExpr); ok {
					if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
						literal(kv.Value, "failure.Error code")
					}
				} else if i == 0 {
					literal(el, "failure.Error code")
				}
			}
		}
		return true
	})
	return res, nil
}

// TestDetail: a failure's own detail, else its code's sentence; an error
// without a code is internal_error's.
func TestDetail(t *testing.T) {
	t.Parallel()
	if got := failure.Detail(failure.New(failure.SourceUnavailable, "the file went away")); got != "the file went away" {
		t.Errorf("own detail: %q", got)
	}
	if got, want := failure.Detail(failure.New(failure.SourceUnavailable, "")), failure.Lookup(failure.SourceUnavailable).WhatHappened; got != want {
		t.Errorf("no detail: %q, want %q", got, want)
	}
	if got, want := failure.Detail(errors.New("boom")), failure.Lookup(failure.Internal).WhatHappened; got != want {
		t.Errorf("plain error: %q, want %q", got, want)
	}
}

// TestOutOfFiles: a cause the operating system refused for want of a file
// descriptor, whichever step met it, is too_many_open_files (the operator's,
// retried) with the step's detail; other failures keep their code.
func TestOutOfFiles(t *testing.T) {
	emfile := &os.PathError{Op: "open", Path: "/data/c.csv", Err: syscall.EMFILE}
	enfile := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("socket", syscall.ENFILE)}
	for _, tc := range []struct {
		name   string
		err    error
		want   failure.Code
		detail string
	}{
		{"source file", failure.Wrap(failure.SourceUnavailable, fmt.Errorf("csv:/data/c.csv: %w", emfile), "csv:/data/c.csv"), failure.TooManyOpenFiles, "csv:/data/c.csv"},
		{"wrapped again", fmt.Errorf("page 3: %w", failure.Wrap(failure.DestinationUnavailable, enfile, "POST /contacts")), failure.TooManyOpenFiles, "POST /contacts"},
		{"no code", fmt.Errorf("build: %w", emfile), failure.TooManyOpenFiles, "build: open /data/c.csv: too many open files"},
		{"another cause", failure.Wrap(failure.SourceUnavailable, errors.New("no such file"), "csv:/data/c.csv"), failure.SourceUnavailable, "csv:/data/c.csv"},
	} {
		err := failure.OutOfFiles(tc.err)
		if got := failure.CodeOf(err); got != tc.want {
			t.Errorf("%s: code %s, want %s", tc.name, got, tc.want)
		}
		if got := failure.Detail(err); got != tc.detail {
			t.Errorf("%s: detail %q, want %q", tc.name, got, tc.detail)
		}
		if tc.want == failure.TooManyOpenFiles && !(errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) {
			t.Errorf("%s: the cause is lost: %v", tc.name, err)
		}
	}
	if failure.OutOfFiles(nil) != nil {
		t.Error("OutOfFiles(nil) != nil")
	}
	if e := failure.Lookup(failure.TooManyOpenFiles); e.Owner != failure.OwnerOperator || !e.Retryable {
		t.Errorf("too_many_open_files: owner %s, retryable %v", e.Owner, e.Retryable)
	}
}

// TestErrorAfterASentence: a detail that ends a sentence is not followed by
// ".:" before its cause (the log read "writing twice.: lease lost").
func TestErrorAfterASentence(t *testing.T) {
	t.Parallel()
	cause := errors.New("lease lost")
	for _, tt := range []struct{ detail, want string }{
		{"The run stopped.", "lease_lost: The run stopped. lease lost"},
		{"renew the lease", "lease_lost: renew the lease: lease lost"},
	} {
		if got := failure.Wrap(failure.LeaseLost, cause, "%s", tt.detail).Error(); got != tt.want {
			t.Errorf("got %q, want %q", got, tt.want)
		}
	}
}
