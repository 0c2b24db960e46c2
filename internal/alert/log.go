package alert

import (
	"context"
	"log/slog"
)

// LogSink writes every alert as one structured log line: level error for
// critical alerts, warn for warnings, info otherwise.
type LogSink struct {
	logger *slog.Logger
}

// NewLogSink returns a LogSink writing to logger (slog.Default() when nil).
func NewLogSink(logger *slog.Logger) *LogSink {
	if logger == nil {
		logger = slog.Default()
	}
	return &LogSink{logger: logger}
}

// Name returns "log".
func (*LogSink) Name() string { return "log" }

// Send logs a.
func (s *LogSink) Send(ctx context.Context, a Alert) error {
	s.logger.LogAttrs(ctx, levelOf(a.Severity), "alert",
		slog.String("alert_id", a.ID),
		slog.String("kind", a.Kind),
		slog.String("severity", string(a.Severity)),
		slog.String("workspace", a.Workspace),
		slog.String("sync", a.SyncID),
		slog.String("what_happened", a.WhatHappened),
		slog.String("next_step", a.NextStep),
		slog.String("owner", string(a.Owner)),
		slog.String("link", a.Link),
		slog.Time("at", a.At),
	)
	return nil
}

func levelOf(s Severity) slog.Level {
	switch s {
	case SeverityCritical:
		return slog.LevelError
	case SeverityWarning:
		return slog.LevelWarn
	default:
		return slog.LevelInfo
	}
}
