package upstream

import (
	"context"
	"net/textproto"

	"github.com/aegis-gw/aegis/shared/registry"
)

// Tokens gives the access token of the calling caller's own connection to
// a server with auth: oauth, or the token exchanged for the caller's own
// toward a server with auth: token_exchange (registry.Server.PerCaller); the
// gateway puts one in the context of each request (WithTokens), bound to
// the request's tenant and caller, so that whatever this package sends for
// that request (the call, a session's initialize, a listing, a stream)
// carries that caller's token and no one else's.
type Tokens interface {
	Token(ctx context.Context, srv *registry.Server) (string, error)
}

type tokensKey struct{}

// WithTokens returns ctx carrying t.
func WithTokens(ctx context.Context, t Tokens) context.Context {
	return context.WithValue(ctx, tokensKey{}, t)
}

// TokenError: no access token for a server with auth: oauth (Err says
// why: the caller has no connection, or its connection is broken, or the
// request came with no Tokens at all). Nothing was sent; it maps to the
// gateway's connection refusal and never counts against the circuit
// breaker (the upstream is not at fault).
type TokenError struct {
	Server string
	Err    error
}

func (e *TokenError) Error() string {
	if e.Err == nil {
		return "no connection token for " + e.Server
	}
	return "no connection token for " + e.Server + ": " + e.Err.Error()
}
func (e *TokenError) Unwrap() error { return e.Err }

// credential is what srv's requests carry: the connection's access token
// as a Bearer Authorization for a server with auth: oauth, the brokered
// credential for one that has it, else nil. The value is scrubbed from
// everything the upstream returns.
func (c *Client) credential(ctx context.Context, srv *registry.Server) (*injected, error) {
	if srv.PerCaller() {
		t, _ := ctx.Value(tokensKey{}).(Tokens)
		if t == nil {
			return nil, &TokenError{Server: srv.Name}
		}
		v, err := t.Token(ctx, srv)
		if v = textproto.TrimString(v); err != nil || v == "" {
			return nil, &TokenError{Server: srv.Name, Err: err}
		}
		return &injected{header: "Authorization", value: "Bearer " + v, scrub: NewScrubber(v)}, nil
	}
	cr := srv.Credential
	if cr == nil {
		return nil, nil
	}
	if c.Creds == nil {
		return nil, &CredentialError{Ref: cr.Ref}
	}
	v, err := c.Creds.Resolve(ctx, cr.Ref)
	// net/http trims a header value when it writes it, and refuses one
	// that ends in a newline (a secret file's last line): trim it here,
	// so the value sent and the value scrubbed are the same.
	if v = textproto.TrimString(v); err != nil || v == "" {
		return nil, &CredentialError{Ref: cr.Ref}
	}
	return &injected{header: cr.Header, value: v, scrub: NewScrubber(v)}, nil
}
