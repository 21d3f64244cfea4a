package scan

import (
	"encoding/json"
	"testing"
)

func fuzzSeeds(f *testing.F) {
	for _, s := range []string{
		`{"a":"card 4111 1111 1111 1111","ssn":"123-45-6789"}`,
		`{"\u0067hp_16C7e42F292c6912E7710c838347Ae178B4a":[1,"x"]}`,
		`{"r":"{\"k\":\"AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\"}"}`,
		`["DE89 3704 0044 0532 0130 00","bob@example.com","+44 20 7946 0958","DOB 1990-01-02"]`,
		`{"n":4111111111111111,"password":"Xk9#mP2vLq8z"}`,
		`"-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIHe3CERN421P+Ap3yz1WEqDcog3GxLnbspeGmyUOsCAK\n-----END PRIVATE KEY-----"`,
		`["\ud800","\"\\\u2028",{"":""}]`,
		`{"a":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"}`,
	} {
		f.Add(s)
	}
}

// FuzzScan: no panic; spans lie inside their strings; valid JSON is
// never refused and invalid JSON always is.
func FuzzScan(f *testing.F) {
	fuzzSeeds(f)
	s := New(nil)
	f.Fuzz(func(t *testing.T, doc string) {
		fs, err := s.Scan([]byte(doc), nil)
		if (err == nil) != json.Valid([]byte(doc)) {
			t.Fatalf("Scan(%q) error %v, json.Valid %v", doc, err, json.Valid([]byte(doc)))
		}
		for _, f := range fs {
			if f.Start < 0 || f.End <= f.Start {
				t.Fatalf("Scan(%q): bad span %+v", doc, f)
			}
		}
		s.ScanString(doc, nil)
	})
}

// FuzzRedact: the output is valid JSON, and scanning it again finds none
// of the selected values found in the input.
func FuzzRedact(f *testing.F) {
	fuzzSeeds(f)
	s := New(nil)
	f.Fuzz(func(t *testing.T, doc string) {
		out, found, err := s.Redact([]byte(doc), Kind.Sensitive)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Redact(%q) = %q: invalid JSON", doc, out)
		}
		was := map[string]bool{}
		for _, f := range found {
			if f.Kind.Sensitive() {
				was[f.Kind.String()+textAt([]byte(doc), f)] = true
			}
		}
		again, err := s.Scan(out, nil)
		if err != nil {
			t.Fatalf("Scan(Redact(%q)): %v", doc, err)
		}
		for _, f := range again {
			if v := textAt(out, f); f.Kind.Sensitive() && was[f.Kind.String()+v] {
				t.Fatalf("Redact(%q) = %q: kept %s %q", doc, out, f.Kind, v)
			}
		}
	})
}
