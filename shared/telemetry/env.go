package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Environment variables FromEnv reads.
const (
	// EnvDaemon is set by Lambda (Tracing: Active) to the X-Ray daemon's
	// address; it turns tracing on.
	EnvDaemon = "AWS_XRAY_DAEMON_ADDRESS"
	// EnvTrace=off turns tracing off even where the daemon is available.
	EnvTrace = "AEGIS_TRACE"
	// EnvTraceStdout=1 writes segment documents to stderr, one JSON line
	// each, when there is no daemon (local debugging).
	EnvTraceStdout = "AEGIS_TRACE_STDOUT"
	// EnvMetrics is "emf" (the default in Lambda) or "off" (the default
	// elsewhere).
	EnvMetrics = "AEGIS_METRICS"
	// EnvLogLevel is debug, info (default), warn or error.
	EnvLogLevel = "AEGIS_LOG_LEVEL"
	// EnvFunction is set by Lambda; its presence means "in Lambda".
	EnvFunction = "AWS_LAMBDA_FUNCTION_NAME"
)

// Setup is what FromEnv configured. Nil fields are off.
type Setup struct {
	Tracer   *Tracer                  // nil: no spans
	Provider *sdktrace.TracerProvider // nil when Tracer is
	Exporter *Exporter                // nil when Tracer is
	Metrics  *EMF                     // nil: no metrics
	Logger   *slog.Logger             // JSON lines on stdout with correlation ids
}

// FromEnv configures telemetry from the environment (getenv: os.Getenv),
// writing metrics and logs to stdout and debug segments to stderr. It
// returns a shutdown function to call once at exit (it flushes nothing:
// spans are sent as they end) and fails on a bad setting, naming it.
func FromEnv(getenv func(string) string) (Setup, func(context.Context) error, error) {
	return fromEnv(getenv, os.Stdout, os.Stderr)
}

func fromEnv(getenv func(string) string, stdout, stderr io.Writer) (Setup, func(context.Context) error, error) {
	var s Setup
	noop := func(context.Context) error { return nil }
	var level slog.Level
	switch v := strings.ToLower(getenv(EnvLogLevel)); v {
	case "", "info":
		level = slog.LevelInfo
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return s, noop, fmt.Errorf("%s=%q: want debug, info, warn or error", EnvLogLevel, v)
	}
	s.Logger = NewLogger(stdout, level)

	inLambda := getenv(EnvFunction) != ""
	switch v := getenv(EnvMetrics); {
	case v == "emf" || (v == "" && inLambda):
		s.Metrics = NewEMF(stdout)
	case v == "off" || v == "":
	default:
		return s, noop, fmt.Errorf("%s=%q: want emf or off", EnvMetrics, v)
	}

	service := getenv(EnvFunction)
	if service == "" {
		service = "aegis"
	}
	switch v := getenv(EnvTrace); v {
	case "", "on":
	case "off":
		return s, noop, nil
	default:
		return s, noop, fmt.Errorf("%s=%q: want on or off", EnvTrace, v)
	}
	switch daemon, stdoutTrace := getenv(EnvDaemon), getenv(EnvTraceStdout); {
	case daemon != "":
		exp, err := NewUDPExporter(daemon, service, inLambda)
		if err != nil {
			return s, noop, fmt.Errorf("%s=%q: %w", EnvDaemon, daemon, err)
		}
		s.Exporter = exp
	case stdoutTrace == "1":
		s.Exporter = NewWriterExporter(stderr, service)
	case stdoutTrace == "" || stdoutTrace == "0":
		return s, noop, nil
	default:
		return s, noop, fmt.Errorf("%s=%q: want 1 or 0", EnvTraceStdout, stdoutTrace)
	}
	s.Provider = NewProvider(s.Exporter)
	s.Tracer = NewTracer(s.Provider, inLambda, getenv)
	return s, s.Provider.Shutdown, nil
}
