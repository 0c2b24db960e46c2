package cli

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

func newFakeBrevoCmd(env Env) *cobra.Command {
	var (
		opts   fakebrevo.Options
		listen string
	)
	cmd := &cobra.Command{
		Use:   "fake-brevo [--listen ADDR]",
		Short: "Serve a Brevo-compatible API for demos and tests, with fault injection",
		Long: `Serve a Brevo-compatible API (the contact endpoints oncesync uses, faithful to Brevo's
public API spec): /v3/contacts, /v3/contacts/{identifier}, /v3/contacts/import,
/v3/processes, /v3/processes/{id} and /v3/contacts/attributes, with Brevo's
rate-limit headers.

Imports behave as Brevo documents them: POST /v3/contacts/import answers 202
with a processId, and the process runs later (--process-delay, plus
--import-row-delay per row). It skips the rows it refuses (an invalid or
--refuse-email address, a share set by --import-skip-rate, an EXT_ID owned by
another contact) and, once completed, GET /v3/processes/{id} lists them in
info.import as URLs of CSV reports, served under /_reports or, with
--report-listen, on a second address (another origin, which must never get
the api-key). --import-fail-rate makes processes fail whole (status failed,
nothing applied).

Contact attributes: by default the fake stores every attribute a write names
(GET /v3/contacts/attributes answers 404, so oncesync does not check them).
With --attribute it models an account as Brevo does: the attributes a new
account has (EMAIL, FIRSTNAME, LASTNAME, SMS, WHATSAPP, LANDLINE_NUMBER,
EXT_ID) and those named, listed by GET /v3/contacts/attributes; a write's other
attributes are dropped without an error, and oncesync check and each run
refuse a mapping that names one. A typed attribute (NAME:date, :float,
:boolean) drops a value not of its type, as Brevo does; a category attribute
(NAME:category=LABEL|LABEL..., options numbered from 1) keeps only an
option's number.

GET /_stats returns JSON counters: requests, contacts_written, contacts,
duplicate_writes (a contact written again with exactly the attributes it had),
import_rows_skipped, imports_failed and report_requests.
Point a sync's destination base_url at http://ADDR/v3 to use it.`,
		Example: `  oncesync fake-brevo --listen 127.0.0.1:8026
  oncesync fake-brevo --error-rate 0.05 --rate-limit 10 --refuse-email bad@example.com
  oncesync fake-brevo --attribute PLAN --attribute SCORE:float --attribute 'GENDER:category=Men|Women|Kid'
  oncesync fake-brevo --process-delay 2s --import-skip-rate 0.02 --import-fail-rate 0.1 --report-listen 127.0.0.1:8027
  curl -s http://127.0.0.1:8026/_stats`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return listenAdvice(listen, fakebrevo.Serve(ctx, listen, opts, func(addr string) {
				fmt.Fprintf(env.Stdout, "fake Brevo listening on http://%s/v3 (stats: http://%s/_stats)\n", addr, addr)
			}))
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8026", "address to listen on (port 0 picks a free one)")
	fakebrevo.RegisterFlags(cmd.Flags(), &opts)
	return cmd
}
