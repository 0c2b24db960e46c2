package failure_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
)

type advising struct{}

func (advising) Error() string  { return "cause" }
func (advising) Advice() string { return "free some space" }

// TestWrapAddsAdvice: a cause that carries advice ends the detail of any
// failure wrapping it, once, however deep it is wrapped; other causes
// leave the detail as given.
func TestWrapAddsAdvice(t *testing.T) {
	t.Parallel()
	deep := fmt.Errorf("sqlite claim: %w", advising{})
	inner := failure.Wrap(failure.StoreUnavailable, deep, "could not open the store")
	for _, tc := range []struct {
		err  error
		want string
	}{
		{failure.Wrap(failure.StoreUnavailable, deep, "could not %s", "claim"), "could not claim: free some space"},
		{failure.Wrap(failure.StoreUnavailable, inner, "%s", inner.Detail), "could not open the store: free some space"},
		{failure.Wrap(failure.StoreUnavailable, errors.New("refused"), "could not claim"), "could not claim"},
		{failure.Wrap(failure.LeaseLost, deep, "The run stopped."), "The run stopped. Free some space"},
	} {
		if got := failure.Detail(tc.err); got != tc.want {
			t.Errorf("detail %q, want %q", got, tc.want)
		}
	}
}
