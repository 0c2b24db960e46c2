package cli

import (
	"fmt"
	"runtime/debug"
)

// linkedCommit is the commit `make build` links in (-ldflags -X), for
// builds the toolchain did not stamp (GOFLAGS=-buildvcs=false, a copy
// without .git). Never written at run time.
var linkedCommit string

// versionLine is what `oncesync --version` prints after "oncesync ": the
// module version and the commit the binary was built from, as the Go
// toolchain stamped them (go build in a git checkout; `go run` and `go test`
// stamp no commit).
func versionLine(info *debug.BuildInfo, ok bool, linked string) string {
	if !ok || info == nil {
		return "(unknown version; built without module information)"
	}
	version := info.Main.Version
	if version == "" {
		version = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		rev = linked
	}
	if rev == "" {
		return version + " (commit unknown: built without version control information)"
	}
	commit := "commit " + rev
	if at != "" {
		commit += " of " + at
	}
	if modified {
		commit += ", with uncommitted changes"
	}
	return fmt.Sprintf("%s (%s, %s)", version, commit, info.GoVersion)
}

func versionLineOf(info *debug.BuildInfo, ok bool) string { return versionLine(info, ok, linkedCommit) }
