package connect

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aegis-gw/aegis/shared/audit"
	"github.com/aegis-gw/aegis/shared/correlation"
	"github.com/aegis-gw/aegis/shared/netguard"
	"github.com/aegis-gw/aegis/shared/refusal"
	"github.com/aegis-gw/aegis/shared/registry"
	"github.com/aegis-gw/aegis/shared/telemetry"
)

// client speaks to an authorization server's token and revocation
// endpoints as the client a tenant registered there for a server
// (registry.OAuthClient): the connections' code exchange, refresh and
// revocation, and token exchange.
type client struct {
	HTTP    *http.Client // its dialer must apply netguard.Control
	Local   bool         // aegis serve: http and loopback allowed
	Secrets Secrets      // client_secret_ref; nil: public clients only
}

// subtleEqual compares two secrets in constant time.
func subtleEqual(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// tokenTimeout bounds one token request.
const tokenTimeout = 10 * time.Second

// tokenResponse is a token endpoint's answer (RFC 6749 §5.1).
type tokenResponse struct {
	Tokens
	scope     string
	expiresIn int64
	// issuedType is a token exchange's issued_token_type (RFC 8693 §2.2.1).
	issuedType string
}

// maxTokenAnswer bounds a token endpoint's answer.
const maxTokenAnswer = 64 << 10

// creds are the client a request is made as: its id, and its secret (""
// for a public client).
type creds struct{ id, secret string }

// configured is srv's client as its registry entry names it, the secret
// resolved from its reference.
func (cl *client) configured(ctx context.Context, srv *registry.Server) (creds, error) {
	ref := srv.OAuth.ClientSecretRef
	if ref == "" {
		return creds{id: srv.OAuth.ClientID}, nil
	}
	if cl.Secrets == nil {
		return creds{}, errors.New("the client secret cannot be resolved here")
	}
	v, err := cl.Secrets.Resolve(ctx, ref)
	if err != nil || v == "" {
		return creds{}, errors.New("the client secret could not be resolved")
	}
	return creds{srv.OAuth.ClientID, v}, nil
}

// tokenRequest POSTs form to endpoint as cr (client_secret_basic with a
// secret, else client_id in the form) and reads the tokens. Errors carry
// the OAuth error code at most, never the answer's text.
func (cl *client) tokenRequest(ctx context.Context, cr creds, endpoint string, form url.Values) (tokenResponse, error) {
	var out tokenResponse
	if err := netguard.ValidateFetchURL(endpoint, cl.Local); err != nil {
		return out, err
	}
	status, raw, err := cl.post(ctx, cr, endpoint, form)
	if err != nil {
		return out, err
	}
	var ans struct {
		AccessToken  string `json:"access_token"`
		TokenType    string `json:"token_type"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Scope        string `json:"scope"`
		IssuedType   string `json:"issued_token_type"`
		Error        string `json:"error"`
	}
	_ = json.Unmarshal(raw, &ans)
	clear(raw)
	if status != http.StatusOK || ans.AccessToken == "" {
		return out, fmt.Errorf("the token endpoint answered HTTP %d %s", status, oauthCode(ans.Error))
	}
	if !strings.EqualFold(ans.TokenType, "Bearer") {
		return out, fmt.Errorf("the token endpoint gave a %q token, not a Bearer token", oauthCode(ans.TokenType))
	}
	out.Access, out.Refresh, out.Type = ans.AccessToken, ans.RefreshToken, "Bearer"
	out.scope, out.expiresIn, out.issuedType = ans.Scope, ans.ExpiresIn, ans.IssuedType
	return out, nil
}

// post POSTs form to endpoint as cr (client_secret_basic with a secret,
// else client_id in the form), within tokenTimeout, and returns the
// answer's status and at most maxTokenAnswer bytes of its body.
func (cl *client) post(ctx context.Context, cr creds, endpoint string, form url.Values) (int, []byte, error) {
	if cr.secret == "" {
		form.Set("client_id", cr.id)
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cr.secret != "" {
		req.SetBasicAuth(url.QueryEscape(cr.id), url.QueryEscape(cr.secret))
	}
	return cl.do(ctx, req)
}

// do sends req within tokenTimeout and returns the answer's status and at
// most maxTokenAnswer bytes of its body.
func (cl *client) do(ctx context.Context, req *http.Request) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	req = req.WithContext(ctx)
	req.Header.Set("Accept", "application/json")
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		return 0, nil, errors.New("the authorization server could not be reached")
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer+1))
	if err != nil || len(raw) > maxTokenAnswer {
		return 0, nil, errors.New("the authorization server's answer could not be read")
	}
	return resp.StatusCode, raw, nil
}

// register registers a confidential client with the authorization code
// and refresh token grants and the one redirect URI at endpoint (RFC 7591,
// open registration) and returns it. Errors carry the OAuth error code at
// most.
func (cl *client) register(ctx context.Context, endpoint, name, redirect string) (creds, error) {
	if err := netguard.ValidateFetchURL(endpoint, cl.Local); err != nil {
		return creds{}, err
	}
	body, _ := json.Marshal(map[string]any{
		"client_name": name, "redirect_uris": []string{redirect}, "grant_types": []string{"authorization_code", "refresh_token"},
		"response_types": []string{"code"}, "token_endpoint_auth_method": "client_secret_basic",
	})
	req, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return creds{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	status, raw, err := cl.do(ctx, req)
	if err != nil {
		return creds{}, err
	}
	var ans struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Error        string `json:"error"`
	}
	_ = json.Unmarshal(raw, &ans)
	clear(raw)
	if (status != http.StatusCreated && status != http.StatusOK) || ans.ClientID == "" || len(ans.ClientID) > maxEndpoint {
		return creds{}, fmt.Errorf("the registration endpoint answered HTTP %d %s", status, oauthCode(ans.Error))
	}
	return creds{ans.ClientID, ans.ClientSecret}, nil
}

// record writes w an audit record of kind for c at now: outcome allowed,
// or error for a failure (detail says why, and never holds a token). A
// record that cannot be written is kept in log's line.
func record(ctx context.Context, w audit.Writer, log *slog.Logger, now time.Time, kind string, c Connection, detail string) {
	if w == nil {
		return
	}
	rec := audit.Record{
		Time: now.UTC(), Tenant: c.Tenant, Caller: c.Caller, Layer: string(refusal.LayerGateway),
		CorrelationID: cmp.Or(telemetry.CorrelationID(ctx), correlation.ID("")),
		Method:        kind, Server: c.Server, Connection: c.ID, Outcome: audit.OutcomeAllowed,
		PolicyHash: audit.PolicyHashNone, Detail: detail,
	}
	if kind == EventFailure {
		rec.Outcome = audit.OutcomeError
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), auditTimeout)
	defer cancel()
	if err := w.Write(wctx, rec.Bounded()); err != nil {
		log.Error("connection event not audited; record kept in this log line", "record", rec, "err", err)
	}
}
