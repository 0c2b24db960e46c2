package alert

import (
	"fmt"
	"log/slog"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
)

// FromConfig returns a Dispatcher with the sinks cfg enables: the log sink
// always, then webhook (when its URL is set), e-mail (host set) and Sentry
// (DSN set), with the default retry policy. Errors never quote a secret.
func FromConfig(cfg config.Alerts, logger *slog.Logger, clk clock.Clock) (*Dispatcher, error) {
	sinks, err := SinksFromConfig(cfg, logger, clk)
	if err != nil {
		return nil, err
	}
	return NewDispatcher(DispatcherParams{Sinks: sinks, Logger: logger, Clock: clk}), nil
}

// SinksFromConfig builds the sinks cfg enables (see FromConfig).
func SinksFromConfig(cfg config.Alerts, logger *slog.Logger, clk clock.Clock) ([]Sink, error) {
	if clk == nil {
		clk = clock.Real{}
	}
	sinks := []Sink{NewLogSink(logger)}
	if w := cfg.Webhook; w.URL != "" {
		s, err := NewWebhookSink(WebhookSinkParams{URL: w.URL, Secret: w.Secret, Clock: clk})
		if err != nil {
			return nil, fmt.Errorf("alerts.webhook: %w", err)
		}
		sinks = append(sinks, s)
	}
	if e := cfg.Email; e.Host != "" {
		s, err := NewEmailSink(EmailSinkParams{
			Host: e.Host, Port: e.Port, Username: e.Username, Password: e.Password,
			From: e.From, To: e.To, StartTLS: e.StartTLS, Clock: clk,
		})
		if err != nil {
			return nil, fmt.Errorf("alerts.email: %w", err)
		}
		sinks = append(sinks, s)
	}
	if s := cfg.Sentry; s.DSN != "" {
		sk, err := NewSentrySink(SentrySinkParams{DSN: s.DSN})
		if err != nil {
			return nil, fmt.Errorf("alerts.sentry: %w", err)
		}
		sinks = append(sinks, sk)
	}
	return sinks, nil
}
