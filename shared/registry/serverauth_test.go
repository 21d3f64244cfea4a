package registry

import (
	"errors"
	"strings"
	"testing"
)

// TestValidateServerAuth: the one rule of a server's auth settings, for
// each mode, naming the first bad field.
func TestValidateServerAuth(t *testing.T) {
	client := func(f func(*OAuthClient)) *OAuthClient {
		o := &OAuthClient{ClientID: "aegis", ClientSecretRef: "env:SECRET", Scopes: []string{"mcp"}}
		if f != nil {
			f(o)
		}
		return o
	}
	cred := &Credential{Header: "Authorization", Ref: "env:TOKEN"}
	for _, tc := range []struct {
		name      string
		auth      string
		o         *OAuthClient
		cred      *Credential
		wantField string // "": valid
	}{
		{"brokered default", "", nil, cred, ""},
		{"brokered named", AuthBrokered, nil, nil, ""},
		{"brokered with oauth", AuthBrokered, client(nil), nil, "oauth"},
		{"unknown mode", "saml", nil, nil, "auth"},
		{"oauth", AuthOAuth, client(nil), nil, ""},
		{"oauth public client", AuthOAuth, client(func(o *OAuthClient) { o.ClientSecretRef = "" }), nil, ""},
		{"oauth without client", AuthOAuth, nil, nil, "oauth"},
		{"oauth, dynamic registration", AuthOAuth, client(func(o *OAuthClient) { o.ClientID, o.ClientSecretRef = "", "" }), nil, ""},
		{"oauth, secret without client id", AuthOAuth, client(func(o *OAuthClient) { o.ClientID = "" }), nil, "oauth.client_secret_ref"},
		{"oauth with credential", AuthOAuth, client(nil), cred, "credential"},
		{"oauth with token endpoint", AuthOAuth, client(func(o *OAuthClient) { o.TokenEndpoint = "https://as.example/token" }), nil, "oauth.token_endpoint"},
		{"oauth with audience", AuthOAuth, client(func(o *OAuthClient) { o.Audience = "docs" }), nil, "oauth.audience"},
		{"oauth with subject type", AuthOAuth, client(func(o *OAuthClient) { o.SubjectTokenType = SubjectJWT }), nil, "oauth.subject_token_type"},
		{"exchange, discovered", AuthTokenExchange, client(nil), nil, ""},
		{"exchange, configured", AuthTokenExchange, client(func(o *OAuthClient) {
			o.TokenEndpoint, o.Audience, o.SubjectTokenType = "https://sts.example/oauth2/token", "urn:docs", SubjectJWT
		}), nil, ""},
		{"exchange, access_token type", AuthTokenExchange, client(func(o *OAuthClient) { o.SubjectTokenType = SubjectAccessToken }), nil, ""},
		{"exchange without client", AuthTokenExchange, nil, nil, "oauth"},
		{"exchange with credential", AuthTokenExchange, client(nil), cred, "credential"},
		{"exchange, empty client id", AuthTokenExchange, client(func(o *OAuthClient) { o.ClientID, o.ClientSecretRef = "", "" }), nil, "oauth.client_id"},
		{"oauth, client id with a space", AuthOAuth, client(func(o *OAuthClient) { o.ClientID = "a b" }), nil, "oauth.client_id"},
		{"exchange, bad secret ref", AuthTokenExchange, client(func(o *OAuthClient) { o.ClientSecretRef = "vault:x" }), nil, "oauth.client_secret_ref"},
		{"exchange, bad scope", AuthTokenExchange, client(func(o *OAuthClient) { o.Scopes = []string{"a b"} }), nil, "oauth.scopes[0]"},
		{"exchange, relative endpoint", AuthTokenExchange, client(func(o *OAuthClient) { o.TokenEndpoint = "/token" }), nil, "oauth.token_endpoint"},
		{"exchange, ftp endpoint", AuthTokenExchange, client(func(o *OAuthClient) { o.TokenEndpoint = "ftp://sts.example/token" }), nil, "oauth.token_endpoint"},
		{"exchange, endpoint with user", AuthTokenExchange, client(func(o *OAuthClient) { o.TokenEndpoint = "https://u:p@sts.example/token" }), nil, "oauth.token_endpoint"},
		{"exchange, endpoint with fragment", AuthTokenExchange, client(func(o *OAuthClient) { o.TokenEndpoint = "https://sts.example/token#x" }), nil, "oauth.token_endpoint"},
		{"exchange, long endpoint", AuthTokenExchange, client(func(o *OAuthClient) { o.TokenEndpoint = "https://sts.example/" + strings.Repeat("a", maxEndpoint) }), nil, "oauth.token_endpoint"},
		{"exchange, audience with space", AuthTokenExchange, client(func(o *OAuthClient) { o.Audience = "a b" }), nil, "oauth.audience"},
		{"exchange, unknown subject type", AuthTokenExchange, client(func(o *OAuthClient) { o.SubjectTokenType = "id_token" }), nil, "oauth.subject_token_type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateServerAuth(tc.auth, tc.o, tc.cred)
			if tc.wantField == "" {
				if err != nil {
					t.Fatalf("ValidateServerAuth = %v; want nil", err)
				}
				return
			}
			var ae *AuthError
			if !errors.As(err, &ae) || ae.Field != tc.wantField || ae.Reason == "" {
				t.Fatalf("ValidateServerAuth = %v; want an *AuthError on %s", err, tc.wantField)
			}
		})
	}
}

// TestPerCaller: which modes send a token of the caller's own.
func TestPerCaller(t *testing.T) {
	for _, tc := range []struct {
		auth                       string
		connection, exchange, mine bool
	}{
		{"", false, false, false},
		{AuthBrokered, false, false, false},
		{AuthOAuth, true, false, true},
		{AuthTokenExchange, false, true, true},
	} {
		s := &Server{Auth: tc.auth}
		if s.NeedsConnection() != tc.connection || s.ExchangesToken() != tc.exchange || s.PerCaller() != tc.mine {
			t.Errorf("auth %q: NeedsConnection %v, ExchangesToken %v, PerCaller %v", tc.auth, s.NeedsConnection(), s.ExchangesToken(), s.PerCaller())
		}
	}
}
