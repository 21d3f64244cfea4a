package audit_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aegis-gw/aegis/shared/audit"
)

// testSecret is a fixed params key secret for tests and golden records.
var testSecret = bytes.Repeat([]byte{0x5a}, audit.ParamsKeySize)

func testKey(t testing.TB) audit.ParamsKey {
	t.Helper()
	k, err := audit.NewParamsKey(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParamsKeyHash(t *testing.T) {
	k := testKey(t)
	other, err := audit.GenerateParamsKey()
	if err != nil {
		t.Fatal(err)
	}
	// The format, and that the hex is HMAC-SHA-256(secret, canonical form).
	h := k.Hash(json.RawMessage(` {"to" : "acct-1", "amount":5} `))
	m := hmac.New(sha256.New, testSecret)
	m.Write([]byte(`{"amount":5,"to":"acct-1"}`))
	if want := "hmac-sha256:" + k.ID() + ":" + hex.EncodeToString(m.Sum(nil)); h != want {
		t.Fatalf("Hash = %s, want %s", h, want)
	}
	plain := sha256.Sum256([]byte(`{"amount":5,"to":"acct-1"}`))
	for _, c := range []struct {
		name string
		got  bool
		want bool
	}{
		{"valid format", audit.IsParamsHash(h), true},
		{"key id in the hash", audit.ParamsHashKeyID(h) == k.ID(), true},
		{"another key, another hash", other.Hash(json.RawMessage(`{"to":"acct-1","amount":5}`)) == h, false},
		{"plain SHA-256 is not in it", strings.Contains(h, hex.EncodeToString(plain[:])), false},
		{"bare hex is not a params hash", audit.IsParamsHash(hex.EncodeToString(plain[:])), false},
		{"upper-case hex is not", audit.IsParamsHash(strings.ToUpper(h)), false},
		{"the zero key hashes nothing", audit.ParamsKey{}.Hash(json.RawMessage(`{}`)) == "", true},
		{"id is derived from the secret", testKey(t).ID() == k.ID() && len(k.ID()) == 16, true},
	} {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
}

// TestParamsKeyNeverShown: no way of printing, logging or encoding a key
// shows its secret, in any spelling.
func TestParamsKeyNeverShown(t *testing.T) {
	k := testKey(t)
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "key", k, "ptr", &k)
	js, _ := json.Marshal(map[string]any{"key": k})
	_, err := audit.NewParamsKey(testSecret[:5])
	_, perr := audit.ParseParamsKey(k.FormatSecret() + "zz")
	outs := map[string]string{
		"%v": fmt.Sprintf("%v", k), "%+v": fmt.Sprintf("%+v", k), "%#v": fmt.Sprintf("%#v", k), "String": k.String(),
		"%x": fmt.Sprintf("%x", k), "%q": fmt.Sprintf("%q", k), "slog": logged.String(), "json": string(js),
		"error": err.Error(), "parse error": perr.Error(),
	}
	secretHex := hex.EncodeToString(testSecret)
	for name, out := range outs {
		for _, form := range []string{string(testSecret), secretHex, strings.ToUpper(secretHex), fmt.Sprint(testSecret)} {
			if strings.Contains(out, form) {
				t.Errorf("%s shows the secret: %s", name, out)
			}
		}
	}
	back, err := audit.ParseParamsKey(k.FormatSecret() + "\n")
	if err != nil || back.ID() != k.ID() {
		t.Fatalf("ParseParamsKey(FormatSecret) = %v, %v", back, err)
	}
}
