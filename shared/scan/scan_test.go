package scan

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestScan: each kind found in its string, with its rule, path and span.
func TestScan(t *testing.T) {
	ghp := "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
	tests := []struct {
		name, doc string
		want      []string // "kind rule path text"
	}{
		{"github token", `{"a":"use ` + ghp + ` now"}`, []string{"credential github-pat /a " + ghp}},
		{"escaped letter", `{"a":"\u0067hp_16C7e42F292c6912E7710c838347Ae178B4a"}`, []string{"credential github-pat /a " + ghp}},
		{"in a key", `{"x":{"` + ghp + `":1}}`, []string{"credential github-pat /x/" + ghp + " " + ghp}},
		{"card", `["card 4111 1111 1111 1111 exp 12/29"]`, []string{"card card-luhn /0 4111 1111 1111 1111"}},
		{"card as a number", `{"n":5500000000000004}`, []string{"card card-luhn /n 5500000000000004"}},
		{"mastercard 2-series", `{"n":"2221000000000009"}`, []string{"card card-luhn /n 2221000000000009"}},
		{"ssn", `{"a":"ssn 123-45-6789."}`, []string{"ssn ssn /a 123-45-6789"}},
		{"bare ssn with context", `{"a":"SSN: 123456789"}`, []string{"ssn ssn-bare /a 123456789"}},
		{"iban", `{"a":"pay DE89 3704 0044 0532 0130 00 today"}`, []string{"iban iban /a DE89 3704 0044 0532 0130 00"}},
		{"email", `{"a":"mail bob.smith+x@mail.example.org."}`, []string{"email email /a bob.smith+x@mail.example.org"}},
		{"phones", `{"a":"(415) 555-0134, +44 20 7946 0958"}`, []string{"phone phone-nanp /a (415) 555-0134", "phone phone-e164 /a +44 20 7946 0958"}},
		{"dob", `{"dob":"1990-04-12","t":"born 04/12/1990"}`, []string{"dob dob /dob 1990-04-12", "dob dob /t 04/12/1990"}},
		{"aws pair", `{"a":"AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`, []string{
			"credential aws-access-key-id /a AKIAIOSFODNN7EXAMPLE", "credential aws-secret-access-key /a wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}},
		{"secret assignment", `{"a":"password=Xk9#mP2vLq8z"}`, []string{"credential secret-assignment /a Xk9#mP2vLq8z"}},
		{"secret member", `{"api_key":"Zx8Qp2Lm9Rt4Vb7N"}`, []string{"credential secret-assignment /api_key Zx8Qp2Lm9Rt4Vb7N"}},
		{"gitlab routable token", `{"a":"token glpat-Q3h8Zk2pLm9Xv4Rt7Bn1Cw6Yd5Fs0Ga.01a2b3c4d."}`, []string{"credential gitlab-pat /a glpat-Q3h8Zk2pLm9Xv4Rt7Bn1Cw6Yd5Fs0Ga.01a2b3c4d"}},
		{"truncated pem key", `{"a":"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHe3CERN421P+Ap3yz1W\n-----END PRIVATE KEY-----"}`, []string{"credential pem-private-key /a MC4CAQAwBQYDK2VwBCIEIHe3CERN421P+Ap3yz1W"}},
		{"placeholders", `{"a":"ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx AKIAXXXXXXXXXXXXXXXX glpat-XXXXXXXXXXX-XXXXXXXX AIzaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}`, nil},
		{"pointer escapes", `{"a/b~c":"4111111111111111"}`, []string{"card card-luhn /a~1b~0c 4111111111111111"}},
		{"nothing", `{"id":"123e4567-e89b-12d3-a456-426614174000","u":"user@example","o":"@Override","v":"v1.2.3","t":"2026-11-30T09:00:00Z","n":1700000000004,"p":"123-456-7890","s":"000-12-3456"}`, nil},
	}
	s := New(nil)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs, err := s.Scan([]byte(tc.doc), nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				got = append(got, f.Kind.String()+" "+f.Rule+" "+f.Path+" "+textAt([]byte(tc.doc), f))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("Scan(%s)\n got %q\nwant %q", tc.doc, got, tc.want)
			}
		})
	}
}

// TestScanNested: a string that holds JSON is scanned inside, to
// MaxDepth levels; Nested holds the inner pointers.
func TestScanNested(t *testing.T) {
	doc := `{"r":"{\"a\":[\"ssn 123-45-6789\",\"{\\\"b\\\":\\\"4111111111111111\\\"}\"]}"}`
	fs, err := New(nil).Scan([]byte(doc), nil)
	if err != nil || len(fs) != 2 {
		t.Fatalf("Scan = %+v, %v", fs, err)
	}
	if f := fs[0]; f.Kind != KindSSN || f.Path != "/r" || strings.Join(f.Nested, " ") != "/a/0" {
		t.Errorf("first = %+v", f)
	}
	if f := fs[1]; f.Kind != KindCard || strings.Join(f.Nested, " ") != "/a/1 /b" {
		t.Errorf("second = %+v", f)
	}
	// At depth 2 the innermost JSON text is scanned as plain text.
	fs, _ = New(&Options{MaxDepth: 2}).Scan([]byte(doc), nil)
	if len(fs) != 2 || strings.Join(fs[1].Nested, " ") != "/a/1" {
		t.Errorf("MaxDepth 2: %+v", fs)
	}
}

// TestKinds: Options.Kinds turns kinds on; names and sensitivity.
func TestKinds(t *testing.T) {
	doc := []byte(`{"a":"4111111111111111 bob@example.com"}`)
	fs, _ := New(&Options{Kinds: []Kind{KindEmail}}).Scan(doc, nil)
	if len(fs) != 1 || fs[0].Kind != KindEmail {
		t.Errorf("email only: %+v", fs)
	}
	for k, want := range map[Kind]string{KindCredential: "credential", KindCard: "card", KindSSN: "ssn", KindIBAN: "iban", KindEmail: "email", KindPhone: "phone", KindDOB: "dob", 99: "unknown"} {
		if k.String() != want {
			t.Errorf("%d: %q", k, k.String())
		}
		if k.Sensitive() != (k <= KindSSN) {
			t.Errorf("%s.Sensitive() = %v", k, k.Sensitive())
		}
	}
}

// TestRedact: markers in place, valid JSON, the input itself when clean.
func TestRedact(t *testing.T) {
	s := New(nil)
	tests := []struct {
		name, in, want string
		kinds          func(Kind) bool
	}{
		{"value and key", `{"4111111111111111":"ssn 123-45-6789, mail a@b.example.com"}`,
			`{"[masked:card]":"ssn [masked:ssn], mail [masked:email]"}`, nil},
		{"sensitive only", `{"a":"ssn 123-45-6789, mail a@b.example.com"}`,
			`{"a":"ssn [masked:ssn], mail a@b.example.com"}`, Kind.Sensitive},
		{"number", `{"n":4111111111111111,"m":[1,2]}`, `{"n":"[masked:card]","m":[1,2]}`, nil},
		{"nested", `{"r":"{\"k\":\"ghp_16C7e42F292c6912E7710c838347Ae178B4a\"}"}`, `{"r":"{\"k\":\"[masked:credential]\"}"}`, nil},
		{"escapes kept valid", `["\"\u0067hp_16C7e42F292c6912E7710c838347Ae178B4a\"\n"]`, `["\"[masked:credential]\"\n"]`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := s.Redact([]byte(tc.in), tc.kinds)
			if err != nil || string(out) != tc.want || !json.Valid(out) {
				t.Errorf("Redact(%s) = %s, %v; want %s", tc.in, out, err, tc.want)
			}
		})
	}
	clean := []byte(`{"a":"hello"}`)
	if out, _, _ := s.Redact(clean, nil); &out[0] != &clean[0] {
		t.Error("clean input copied")
	}
	var se *SyntaxError
	if _, _, err := s.Redact([]byte(`{"a":`), nil); !errors.As(err, &se) {
		t.Errorf("invalid JSON: %v", err)
	}
}

// TestWalkMatchesEncodingJSON: Walk accepts what encoding/json accepts
// and decodes strings as it does.
func TestWalkMatchesEncodingJSON(t *testing.T) {
	for _, doc := range []string{`{}`, `[]`, ` "x" `, `{"a":[1,-2.5e+3,true,false,null,{"b":"\ud83d\ude00\u00e9\n\ud800"}]}`,
		`{"a":}`, `[1,]`, `01`, `"\x"`, "\"a\tb\"", `{"a":1}x`, `[1.]`, `-`, `"\u12"`} {
		var strs []string
		err := Walk([]byte(doc), func(s *String) error {
			if !s.Number {
				strs = append(strs, string(s.Decoded))
			}
			return nil
		})
		if (err == nil) != json.Valid([]byte(doc)) {
			t.Errorf("Walk(%s) = %v, json.Valid %v", doc, err, json.Valid([]byte(doc)))
		}
		if err == nil && strings.Contains(doc, `\ud83d`) && strs[len(strs)-1] != "😀é\n\uFFFD" {
			t.Errorf("decoded %q", strs)
		}
	}
}

// TestScanZeroAlloc: a clean document costs no allocation.
func TestScanZeroAlloc(t *testing.T) {
	s := New(nil)
	doc := benchDoc(10 << 10)
	dst := make([]Finding, 0, 8)
	s.Scan(doc, dst) // warm the pool
	if n := testing.AllocsPerRun(50, func() { dst, _ = s.Scan(doc, dst[:0]) }); n > 0 && !raceEnabled {
		t.Errorf("%v allocations", n)
	}
}

// TestAWSSecretWordsHoldSecret: secretMember asks for secretWords alone,
// which holds only while every name of an AWS secret holds one of them.
func TestAWSSecretWordsHoldSecret(t *testing.T) {
	for _, w := range awsSecretWords {
		if !secretKeys.inKey([]byte(w)) {
			t.Errorf("%q holds none of secretWords", w)
		}
	}
}

// TestProgressTokenIsNoSecretName: MCP's progressToken is an opaque id
// SDKs mint at random; its member name is not read as a secret's (the
// secret-assignment rule), so a random token is no finding, while the
// same value under a secret's name is, and a card number or a known key
// format as the token still is.
func TestProgressTokenIsNoSecretName(t *testing.T) {
	s := New(nil)
	for _, tc := range []struct {
		doc  string
		want string // the rule of the one finding; "" for none
	}{
		{`{"progressToken":"a1b2c3d4-e5f6-7890-abcd-ef1234567890"}`, ""},
		{`{"_meta":{"progressToken":"progress-test-1"}}`, ""},
		{`{"apiToken":"a1b2c3d4-e5f6-7890-abcd-ef1234567890"}`, "secret-assignment"},
		{`{"progressToken":"4111 1111 1111 1111"}`, "card-luhn"},
		{`{"progressToken":"AKIAZ4QJ3VXK7PRLWN2T"}`, "aws-access-key-id"},
	} {
		found, err := s.Scan([]byte(tc.doc), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if len(found) > 0 {
			got = found[0].Rule
		}
		if got != tc.want || len(found) > 1 {
			t.Errorf("%s: findings %+v, want rule %q", tc.doc, found, tc.want)
		}
	}
}
