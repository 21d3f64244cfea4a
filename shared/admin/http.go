package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
)

// Error codes of the admin API, stable for scripts.
const (
	CodeUnauthorized = "unauthorized"   // 401
	CodeBadRequest   = "bad_request"    // 400, with field
	CodeNotFound     = "not_found"      // 404
	CodeConflict     = "conflict"       // 409
	CodeTooLarge     = "too_large"      // 413
	CodeUnavailable  = "unavailable"    // 503: a store could not be reached
	CodeNotAvailable = "not_configured" // 501: the route's store is not configured
)

// ErrorBody is every error answer.
type ErrorBody struct {
	Error         ErrorDetail `json:"error"`
	CorrelationID string      `json:"correlation_id"`
}

// ErrorDetail names what went wrong; Field names the bad input on a 400.
type ErrorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

type reqInfo struct{ corr, principal string }

type ctxKey struct{}

func withRequest(ctx context.Context, ri reqInfo) context.Context {
	return context.WithValue(ctx, ctxKey{}, ri)
}

func info(r *http.Request) reqInfo {
	ri, _ := r.Context().Value(ctxKey{}).(reqInfo)
	return ri
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"unencodable answer"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, corr string, status int, code, msg, field string) {
	writeJSON(w, status, ErrorBody{Error: ErrorDetail{Code: code, Message: msg, Field: field}, CorrelationID: corr})
}

// fieldError is a 400 naming the bad field.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func badField(field, msg string) error { return &fieldError{field, msg} }

const maxBody = 64 << 10

// readJSON decodes the request body into v, refusing unknown fields. An
// empty body leaves v as it is.
func readJSON(w http.ResponseWriter, r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		return badField("body", "could not be read (at most 64 KiB)")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te):
			return badField(te.Field, "wrong type: want "+te.Type.String())
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
			return badField(f, "unknown field")
		}
		return badField("body", "not valid JSON")
	}
	if d.More() {
		return badField("body", "one JSON object expected")
	}
	return nil
}

// quote is s as a JSON string, for a message: control characters escaped,
// but not < > & (the messages are text, read in a terminal or shown as text
// by the console, where \u003c would only puzzle).
func quote(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}
