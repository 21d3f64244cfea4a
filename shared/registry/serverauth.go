package registry

import (
	"fmt"
	"strings"
)

// The values of Server.Auth: how a call reaches the server.
const (
	// AuthBrokered ("" too) is the default: the server's brokered
	// Credential, the same for every caller, or none.
	AuthBrokered = "brokered"
	// AuthOAuth: each caller reaches the server with their own OAuth
	// grant, a connection (shared/connect, docs/connections.md). A call by
	// a caller without one is answered with a link to make it.
	AuthOAuth = "oauth"
)

// AuthModes are the values Server.Auth takes ("" is AuthBrokered).
var AuthModes = []string{AuthBrokered, AuthOAuth}

// OAuthClient is the client a tenant registered at a server's
// authorization server, used for its callers' connections (auth: oauth).
// The authorization server itself is discovered from the server (RFC 9728,
// then RFC 8414 or OpenID Connect discovery), never configured.
type OAuthClient struct {
	// ClientID is the client's id at the authorization server.
	ClientID string `json:"client_id" yaml:"client_id"`
	// ClientSecretRef names the client's secret, as a credential
	// reference (env:, file:, secretsmanager:, ssm:); "": a public client
	// (PKCE only, token_endpoint_auth_method none).
	ClientSecretRef string `json:"client_secret_ref,omitempty" yaml:"client_secret_ref"`
	// Scopes asked for; nil: the protected resource metadata's
	// scopes_supported, else none.
	Scopes []string `json:"scopes,omitempty" yaml:"scopes"`
}

// Bounds of an OAuth client's fields.
const (
	maxClientID = 256
	maxScopes   = 32
)

// AuthError is a bad field of a server's auth settings: Field is its path
// under the server ("auth", "oauth.client_id", ...).
type AuthError struct {
	Field  string
	Reason string
}

func (e *AuthError) Error() string { return e.Field + ": " + e.Reason }

// ValidateServerAuth checks a server's auth settings with one rule for the
// config file and the admin API: auth is one of AuthModes (or ""); oauth
// settings are given exactly when auth is oauth, with a client id and an
// optional secret reference (ValidateCredentialRef); a server with auth
// oauth has no brokered credential (the connection's token is its only
// Authorization). The first bad field is returned as an *AuthError.
func ValidateServerAuth(auth string, o *OAuthClient, cred *Credential) error {
	switch auth {
	case "", AuthBrokered:
		if o != nil {
			return &AuthError{"oauth", "given only with auth: oauth"}
		}
		return nil
	case AuthOAuth:
	default:
		return &AuthError{"auth", fmt.Sprintf("%q: want one of %s", auth, strings.Join(AuthModes, ", "))}
	}
	if cred != nil {
		return &AuthError{"credential", "a server with auth: oauth is reached with each caller's own token, not a brokered credential"}
	}
	if o == nil {
		return &AuthError{"oauth", "required with auth: oauth: client_id (and client_secret_ref for a confidential client)"}
	}
	if o.ClientID == "" || len(o.ClientID) > maxClientID || !plainWord(o.ClientID) {
		return &AuthError{"oauth.client_id", fmt.Sprintf("want 1-%d printable characters without spaces", maxClientID)}
	}
	if o.ClientSecretRef != "" {
		if err := ValidateCredentialRef(o.ClientSecretRef); err != nil {
			return &AuthError{"oauth.client_secret_ref", err.Error()}
		}
	}
	if len(o.Scopes) > maxScopes {
		return &AuthError{"oauth.scopes", fmt.Sprintf("at most %d", maxScopes)}
	}
	for i, s := range o.Scopes {
		if !validScope(s) {
			return &AuthError{fmt.Sprintf("oauth.scopes[%d]", i), fmt.Sprintf("%q: want a scope of 1-%d printable characters without spaces", s, maxScopeOrRole)}
		}
	}
	return nil
}

// NeedsConnection reports whether calls to s use each caller's own
// connection (auth: oauth).
func (s *Server) NeedsConnection() bool { return s.Auth == AuthOAuth }

// refKinds are the kinds of credential reference (Credential.Ref).
var refKinds = []string{"env", "file", "secretsmanager", "ssm"}

// ValidateCredentialRef checks the form of a credential reference
// ("KIND:NAME", KIND one of env, file, secretsmanager, ssm), the one rule
// of the config file and the admin API. It does not resolve it; whether a
// kind may be used where it runs is shared/credentials' rule.
func ValidateCredentialRef(ref string) error {
	kind, rest, ok := strings.Cut(ref, ":")
	if !ok || rest == "" {
		return fmt.Errorf("%q: want env:NAME, file:/path, secretsmanager:ID or ssm:/name (the value itself is never stored)", ref)
	}
	for _, k := range refKinds {
		if k == kind {
			return nil
		}
	}
	return fmt.Errorf("%q: unknown kind %q (env, file, secretsmanager, ssm)", ref, kind)
}
