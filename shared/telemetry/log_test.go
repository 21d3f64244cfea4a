package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

func TestLogHandlerAddsCorrelationID(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo)
	ctx := WithCorrelationID(context.Background(), "c0ffee")
	log.InfoContext(ctx, "from context")
	log.InfoContext(ctx, "explicit", "correlation_id", "other")
	log.With("correlation_id", "with").InfoContext(ctx, "from With")
	log.Info("no context")
	log.InfoContext(ctx, "secrets", "authorization", "Bearer sk-123", "api_key", "k", "token", "t", "err", "plain")
	var got []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		got = append(got, m)
	}
	want := []any{"c0ffee", "other", "with", nil, "c0ffee"}
	for i, w := range want {
		if got[i]["correlation_id"] != w {
			t.Errorf("line %d (%s): correlation_id %v, want %v", i, got[i]["msg"], got[i]["correlation_id"], w)
		}
	}
	if strings.Count(buf.String(), `"correlation_id"`) != 4 {
		t.Errorf("a line carries correlation_id twice:\n%s", buf.String())
	}
	if s := got[4]; s["authorization"] != "[redacted]" || s["api_key"] != "[redacted]" || s["token"] != "[redacted]" || s["err"] != "plain" {
		t.Errorf("secret-named attributes not redacted: %v", s)
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	var out, errw bytes.Buffer
	// Local default: no tracing, no metrics, a logger.
	s, stop, err := fromEnv(env(), &out, &errw, false)
	if err != nil || s.Tracer != nil || s.Metrics != nil || s.Logger == nil {
		t.Fatalf("local default: %+v %v", s, err)
	}
	_ = stop(context.Background())
	// Lambda: EMF on; tracing on with the daemon address.
	s, stop, err = fromEnv(env(EnvFunction, "aegis-gateway", EnvDaemon, "127.0.0.1:2000"), &out, &errw, false)
	if err != nil || s.Tracer == nil || s.Metrics == nil || !s.Exporter.InLambda || s.Exporter.Service != "aegis-gateway" {
		t.Fatalf("lambda: %+v %v", s, err)
	}
	_ = stop(context.Background())
	// AEGIS_TRACE=off wins over the daemon; AEGIS_METRICS=off over Lambda.
	s, _, err = fromEnv(env(EnvFunction, "f", EnvDaemon, "127.0.0.1:2000", EnvTrace, "off", EnvMetrics, "off"), &out, &errw, false)
	if err != nil || s.Tracer != nil || s.Metrics != nil {
		t.Fatalf("off: %+v %v", s, err)
	}
	// Local debugging: segments on stderr.
	s, stop, err = fromEnv(env(EnvTraceStdout, "1"), &out, &errw, false)
	if err != nil || s.Tracer == nil {
		t.Fatalf("stdout: %+v %v", s, err)
	}
	_, span := s.Tracer.t.Start(context.Background(), "x")
	span.End()
	_ = stop(context.Background())
	if !strings.Contains(errw.String(), `"name":"aegis"`) {
		t.Fatalf("no segment on stderr: %q", errw.String())
	}
	for _, bad := range [][]string{{EnvLogLevel, "loud"}, {EnvMetrics, "prometheus"}, {EnvTrace, "yes"}, {EnvTraceStdout, "true"}, {EnvDaemon, "tcp:127.0.0.1:2000"}} {
		if _, _, err := fromEnv(env(bad...), &out, &errw, false); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("%s=%s: err %v, want one naming the variable", bad[0], bad[1], err)
		}
	}
}

func TestFromEnvLocal(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	var w bytes.Buffer
	s, _, err := FromEnvLocal(env(), &w)
	if err != nil || !s.Prometheus || s.Metrics != nil || s.Tracer != nil {
		t.Fatalf("local default: %+v %v", s, err)
	}
	s, _, err = FromEnvLocal(env(EnvMetrics, "emf", EnvLogLevel, "warn"), &w)
	if err != nil || s.Prometheus || s.Metrics == nil || s.Logger.Enabled(context.Background(), slog.LevelInfo) {
		t.Fatalf("emf, warn: %+v %v", s, err)
	}
	s, _, err = FromEnvLocal(env(EnvMetrics, "off"), &w)
	if err != nil || s.Prometheus || s.Metrics != nil {
		t.Fatalf("off: %+v %v", s, err)
	}
	// The example: each bad value stops start-up, naming its variable.
	for _, bad := range [][]string{{EnvLogLevel, "bogus"}, {EnvMetrics, "statsd"}, {EnvTraceStdout, "yes"}, {EnvTrace, "maybe"}} {
		if _, _, err := FromEnvLocal(env(bad...), &w); err == nil || !strings.Contains(err.Error(), bad[0]+`="`+bad[1]+`"`) {
			t.Errorf("%s=%s: err %v, want one naming the variable and value", bad[0], bad[1], err)
		}
	}
}
