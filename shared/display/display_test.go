package display

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"ascii", "transfer_funds v2 (a.b/c-d) ~!@#$%^&*()_+=[]{}|;:'\",.<>?", "transfer_funds v2 (a.b/c-d) ~!@#$%^&*()_+=[]{}|;:'\",.<>?"},
		{"letters of other scripts", "héllo wörld 世界 Ελλάδα עברית عربي 👍🏽 e\u0301", "héllo wörld 世界 Ελλάδα עברית عربي 👍🏽 e\u0301"},
		{"backslashes are text", `C:\Users\x1b \d+`, `C:\Users\x1b \d+`},
		{"replacement character as such", "a\uFFFDb", "a\uFFFDb"},
		{"the attack", "x\x1b]0;pwned\x07\r\x1b[2Kallowed\tok", `x\x1b]0;pwned\x07\r\x1b[2Kallowed\tok`},
		{"tab lf cr", "a\tb\nc\rd", `a\tb\nc\rd`},
		{"nul and other c0", "\x00\x01\x08\x0b\x0c\x1f", `\x00\x01\x08\x0b\x0c\x1f`},
		{"del", "a\x7fb", `a\x7fb`},
		{"c1 controls", "a\u0080b\u0085c\u009bd\u009f", `a\u0080b\u0085c\u009bd\u009f`},
		{"bidi embeddings and overrides", "\u202a\u202b\u202c\u202d\u202e", `\u202a\u202b\u202c\u202d\u202e`},
		{"bidi isolates", "\u2066\u2067\u2068\u2069", `\u2066\u2067\u2068\u2069`},
		{"bidi marks", "\u200e\u200f\u061c", `\u200e\u200f\u061c`},
		{"trojan source", "ok \u202e hs.live | lruc", `ok \u202e hs.live | lruc`},
		{"zero width", "a\u200bb\u200cc\u200dd\u2060e\ufefff", `a\u200bb\u200cc\u200dd\u2060e\ufefff`},
		{"tag characters", "x\U000E0001\U000E0041\U000E007F", `x\U000e0001\U000e0041\U000e007f`},
		{"other format characters", "\u00ad\u0600\u2061\U000110BD\U0001BCA0", `\u00ad\u0600\u2061\U000110bd\U0001bca0`},
		{"default ignorables not Cf", "\u034f\u115f\u3164\ufe0f\uffa0\U000E0100", `\u034f\u115f\u3164\ufe0f\uffa0\U000e0100`},
		{"separators and blank braille", "a\u2028b\u2029c\u2800d", `a\u2028b\u2029c\u2800d`},
		{"invalid utf-8", "a\xffb\xc3(\xe2\x82", `a\xffb\xc3(\xe2\x82`},
		{"lone surrogate encoded", "\xed\xa0\x80", `\xed\xa0\x80`},
		{"overlong nul", "\xc0\x80", `\xc0\x80`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Text(tt.in)
			if got != tt.want {
				t.Errorf("Text(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, r := range got {
				if r != utf8.RuneError && Hidden(r) || r == utf8.RuneError && !strings.ContainsRune(tt.in, utf8.RuneError) {
					t.Errorf("Text(%q) = %q holds %U", tt.in, got, r)
				}
			}
			if !utf8.ValidString(got) {
				t.Errorf("Text(%q) = %q is not valid UTF-8", tt.in, got)
			}
		})
	}
}

// TestHiddenClasses: every class the package promises to spell out is
// Hidden, code point by code point, and no letter, mark, number,
// punctuation, symbol or space of any script is, unless it is
// default-ignorable (a filler) or the blank braille pattern.
func TestHiddenClasses(t *testing.T) {
	classes := []struct {
		name   string
		lo, hi rune
	}{
		{"C0 controls", 0x00, 0x1F},
		{"DEL", 0x7F, 0x7F},
		{"C1 controls", 0x80, 0x9F},
		{"Arabic letter mark", 0x061C, 0x061C},
		{"zero width space and joiners", 0x200B, 0x200D},
		{"direction marks", 0x200E, 0x200F},
		{"line and paragraph separators", 0x2028, 0x2029},
		{"bidi embeddings and overrides", 0x202A, 0x202E},
		{"word joiner", 0x2060, 0x2060},
		{"bidi isolates", 0x2066, 0x2069},
		{"blank braille pattern", 0x2800, 0x2800},
		{"byte order mark", 0xFEFF, 0xFEFF},
		{"tag characters", 0xE0000, 0xE007F},
		{"variation selectors", 0xFE00, 0xFE0F},
	}
	for _, c := range classes {
		for r := c.lo; r <= c.hi; r++ {
			if !Hidden(r) {
				t.Errorf("%s: Hidden(%U) = false", c.name, r)
			}
		}
	}
	for _, rt := range []*unicode.RangeTable{unicode.Cf, defaultIgnorable} {
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if unicode.Is(rt, r) && !Hidden(r) {
				t.Errorf("Hidden(%U) = false for a format or default-ignorable character", r)
			}
		}
	}
	shown := []*unicode.RangeTable{unicode.L, unicode.M, unicode.N, unicode.P, unicode.S, unicode.Zs}
	for r := rune(0x20); r <= unicode.MaxRune; r++ {
		if unicode.IsOneOf(shown, r) && !unicode.Is(defaultIgnorable, r) && r != 0x2800 && Hidden(r) {
			t.Errorf("Hidden(%U) = true for a visible character", r)
		}
	}
}

func TestTextPlainDoesNotAllocate(t *testing.T) {
	for _, s := range []string{"", "echo", "transfer_funds", "héllo 世界 👍", `C:\path\x1b`} {
		if got := testing.AllocsPerRun(100, func() { _ = Text(s) }); got != 0 {
			t.Errorf("Text(%q): %v allocations, want 0", s, got)
		}
		b := []byte(`{"tool":"` + s + `","n":1}` + "\n")
		if got := testing.AllocsPerRun(100, func() { _ = JSON(b) }); got != 0 {
			t.Errorf("JSON(%q): %v allocations, want 0", b, got)
		}
	}
}

func TestJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"plain", `{"a":"héllo","b":[1,true,null]}`, `{"a":"héllo","b":[1,true,null]}`},
		{"white space outside strings", "{\n\t\"a\": 1,\r\n  \"b\": 2\n}\n", "{\n\t\"a\": 1,\r\n  \"b\": 2\n}\n"},
		{"escapes kept", `{"a":"x\u001b\n\"\\"}`, `{"a":"x\u001b\n\"\\"}`},
		{"del", "{\"a\":\"x\x7fy\"}", `{"a":"x\u007fy"}`},
		{"c1", "{\"a\":\"x\u009b2K\"}", `{"a":"x\u009b2K"}`},
		{"bidi and zero width", "{\"a\":\"\u202e\u200b\u2066\"}", `{"a":"\u202e\u200b\u2066"}`},
		{"tag above U+FFFF", "{\"a\":\"\U000E0041\"}", `{"a":"\udb40\udc41"}`},
		{"in a key", "{\"r\u00adm\":1}", `{"r\u00adm":1}`},
		{"raw c0 in a string", "{\"a\":\"x\x1b\ty\"}", `{"a":"x\u001b\u0009y"}`},
		{"invalid utf-8", "{\"a\":\"x\xffy\"}", `{"a":"x\ufffdy"}`},
		{"hidden outside strings", "\x1b[2K{}\u202e", `\u001b[2K{}\u202e`},
		{"escaped quote does not end the string", "{\"a\":\"\\\"\u202e\"}", `{"a":"\"\u202e"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(JSON([]byte(tt.in)))
			if got != tt.want {
				t.Errorf("JSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			for _, r := range got {
				if Hidden(r) && r != '\n' && r != '\t' && r != '\r' || r == utf8.RuneError {
					t.Errorf("JSON(%q) = %q holds %U", tt.in, got, r)
				}
			}
			// A valid document decodes to the same value.
			var before, after any
			if json.Unmarshal([]byte(tt.in), &before) == nil {
				if err := json.Unmarshal([]byte(got), &after); err != nil {
					t.Fatalf("JSON(%q) = %q is not JSON: %v", tt.in, got, err)
				}
				bb, _ := json.Marshal(before)
				ab, _ := json.Marshal(after)
				if string(bb) != string(ab) {
					t.Errorf("JSON(%q) decodes to %s, want %s", tt.in, ab, bb)
				}
			}
		})
	}
}

// TestJSONOfEncodingJSON: whatever a string holds, encoding/json's output
// passed through JSON holds no Hidden character and decodes to the string.
func TestJSONOfEncodingJSON(t *testing.T) {
	var all strings.Builder
	for r := rune(0); r < 0x30000; r++ {
		if Hidden(r) {
			all.WriteRune(r)
		}
	}
	all.WriteString("\U000E0001\U000E0041\U000E0100 plain é")
	s := all.String()
	b, err := json.Marshal(map[string]string{s: s})
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(b)
	for _, r := range string(got) {
		if Hidden(r) {
			t.Fatalf("JSON left %U raw", r)
		}
	}
	var m map[string]string
	if err := json.Unmarshal(got, &m); err != nil || m[s] != s {
		t.Fatalf("JSON output does not decode to the input: %v", err)
	}
}

func BenchmarkText(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"plain", "transfer_funds_between_accounts"},
		{"unicode", "überweisung 世界 👍 héllo"},
		{"hidden", "x\x1b]0;pwned\x07\r\x1b[2Kallowed\tok"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = Text(bc.s)
			}
		})
	}
}

func BenchmarkJSON(b *testing.B) {
	line := []byte(`{"time":"2026-01-02T03:04:05Z","level":"WARN","msg":"upstream failed","correlation_id":"c0ffee","tenant":"acme","server":"payments","err":"EOF"}` + "\n")
	b.ReportAllocs()
	for b.Loop() {
		_ = JSON(line)
	}
}
