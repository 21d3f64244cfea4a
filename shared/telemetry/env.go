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
	// EnvMetrics is "emf" (the default in Lambda), "prometheus" (the
	// default of `aegis serve`, which serves /metrics; FromEnvLocal only)
	// or "off".
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
	Metrics  *EMF                     // nil: no EMF lines
	// Prometheus: AEGIS_METRICS asks for Prometheus metrics (FromEnvLocal
	// only; the host serves them, telemetry does not).
	Prometheus bool
	Logger     *slog.Logger // JSON lines with correlation ids
	Lines      *Lines       // where Logger writes, for the access log
}

// FromEnv configures telemetry from the environment (getenv: os.Getenv),
// writing metrics and logs to stdout and debug segments to stderr. It
// returns a shutdown function to call once at exit (it flushes nothing:
// spans are sent as they end) and fails on a bad setting, naming it.
func FromEnv(getenv func(string) string) (Setup, func(context.Context) error, error) {
	return fromEnv(getenv, os.Stdout, os.Stderr, false)
}

// FromEnvLocal is FromEnv for `aegis serve`: logs, EMF lines and debug
// segments all go to w (stderr: stdout has the banner), and AEGIS_METRICS
// may also be, and by default is, "prometheus".
func FromEnvLocal(getenv func(string) string, w io.Writer) (Setup, func(context.Context) error, error) {
	return fromEnv(getenv, w, w, true)
}

func fromEnv(getenv func(string) string, stdout, stderr io.Writer, local bool) (Setup, func(context.Context) error, error) {
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
	s.Lines = NewLines(stdout, level)
	s.Logger = s.Lines.Logger()

	inLambda := getenv(EnvFunction) != ""
	switch v := getenv(EnvMetrics); {
	case v == "emf" || (v == "" && inLambda && !local):
		s.Metrics = NewEMF(stdout)
	case local && (v == "prometheus" || v == ""):
		s.Prometheus = true
	case v == "off" || v == "":
	case local:
		return s, noop, fmt.Errorf("%s=%q: want prometheus, emf or off", EnvMetrics, v)
	default:
		return s, noop, fmt.Errorf("%s=%q: want emf or off (prometheus is for aegis serve)", EnvMetrics, v)
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
