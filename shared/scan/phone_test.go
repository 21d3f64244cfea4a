package scan

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nyaruka/phonenumbers"
)

// phoneTypes are the number types the library has example numbers for.
var phoneTypes = []phonenumbers.PhoneNumberType{
	phonenumbers.FIXED_LINE, phonenumbers.MOBILE, phonenumbers.TOLL_FREE, phonenumbers.PREMIUM_RATE,
	phonenumbers.SHARED_COST, phonenumbers.VOIP, phonenumbers.PERSONAL_NUMBER, phonenumbers.PAGER,
	phonenumbers.UAN, phonenumbers.VOICEMAIL,
}

// phoneExample is one of the library's example numbers, as text.
type phoneExample struct {
	region, typ, format, text string
}

// libraryExamples returns the library's example number of every region
// and type, written in its international and E.164 formats, and in its
// national format for the regions of DefaultPhoneRegions.
func libraryExamples() []phoneExample {
	var out []phoneExample
	regions := make([]string, 0, 256)
	for r := range phonenumbers.GetSupportedRegions() {
		regions = append(regions, r)
	}
	slices.Sort(regions)
	for _, r := range regions {
		for _, typ := range phoneTypes {
			n := phonenumbers.GetExampleNumberForType(r, typ)
			if n == nil {
				continue
			}
			ts := strconv.Itoa(int(typ))
			out = append(out,
				phoneExample{r, ts, "international", phonenumbers.Format(n, phonenumbers.INTERNATIONAL)},
				phoneExample{r, ts, "e164", phonenumbers.Format(n, phonenumbers.E164)})
			if slices.Contains(DefaultPhoneRegions, r) {
				out = append(out, phoneExample{r, ts, "national", phonenumbers.Format(n, phonenumbers.NATIONAL)})
			}
		}
	}
	return out
}

// phoneFound reports whether s finds text, alone in a sentence, as one
// phone number.
func phoneFound(s *Scanner, text string) bool {
	in := "call " + text + " today"
	fs := s.ScanString(in, nil)
	return len(fs) == 1 && fs[0].Kind == KindPhone && in[fs[0].Start:fs[0].End] == text
}

// phoneExampleFloors are the shares of the library's example numbers
// TestPhoneLibraryExamples holds the scanner to, by format.
var phoneExampleFloors = map[string]float64{"international": 0.99, "e164": 0.99, "national": 0.90}

// TestPhoneLibraryExamples: the library's own example number of every
// region and type (test data we did not write) is found, written as the
// library writes it: international and E.164 for every region, national
// for DefaultPhoneRegions. Run with -v for the counts and the misses.
func TestPhoneLibraryExamples(t *testing.T) {
	found, total, missed := phoneExampleScore(New(nil))
	for _, f := range []string{"international", "e164", "national"} {
		share := float64(found[f]) / float64(total[f])
		t.Logf("%-13s %5d of %5d found (%.4f)", f, found[f], total[f], share)
		if share < phoneExampleFloors[f] {
			t.Errorf("%s: %.4f found, want at least %.2f", f, share, phoneExampleFloors[f])
		}
	}
	t.Logf("missed: %s", strings.Join(missed, "; "))
	if total["national"] < 30*2 {
		t.Errorf("only %d national examples", total["national"])
	}
}

// phoneExampleScore counts, by format, the library's example numbers s
// finds, and names the first it misses.
func phoneExampleScore(s *Scanner) (found, total map[string]int, missed []string) {
	total, found = map[string]int{}, map[string]int{}
	for _, e := range libraryExamples() {
		total[e.format]++
		if phoneFound(s, e.text) {
			found[e.format]++
		} else if len(missed) < 60 {
			missed = append(missed, e.region+"/"+e.typ+"/"+e.format+" "+e.text)
		}
	}
	return found, total, missed
}

// TestPhoneFormats: the formats people type, and what is not a phone
// number.
func TestPhoneFormats(t *testing.T) {
	s := New(nil)
	for _, p := range []string{
		// The misses the issue names (synthetic customer data).
		"+46 (0)8 928 571 38", "0489 25 37 29", "(08) 8747 6301", "01.84.17.61.18", "+1-903-140-4508x769",
		// North America.
		"(415) 555-0134", "415-555-0134", "415.555.0134", "415 555 0134", "+1 415 555 0134", "+14155550134",
		"415-555-0134 ext. 12", "415-555-0134 x 12", "+1 (415) 555-0134",
		// Elsewhere, national and international.
		"020 7946 0958", "+44 20 7946 0958", "+44 (0)20 7946 0958", "07700 900123", "030 12345678",
		"+49 30 12345678", "+33 1 84 17 61 18", "03-1234-5678", "090-1234-5678", "+81 3-1234-5678",
		"(11) 91234-5678", "+55 11 91234-5678", "8 (912) 345-67-89", "+7 912 345-67-89", "098765 43210",
		"+91 98765 43210", "131 2345 6789", "+86 131 2345 6789", "0812-3456-7890", "+62 812-3456-7890",
		"0803 123 4567", "+234 803 123 4567", "55 1234 5678", "+52 55 1234 5678", "612 34 56 78",
		"+34 612 34 56 78", "312 345 6789", "+39 312 345 6789", "070-123 45 67", "+32 489 25 37 29",
		"+61 8 8747 6301", "+41 44 668 18 00", "+31 20 794 6095", "+48 22 123 45 67",
	} {
		if !phoneFound(s, p) {
			t.Errorf("%q: not found as one phone number: %v", p, s.ScanString("call "+p+" today", nil))
		}
	}
	for _, n := range cleanTexts {
		if fs := s.ScanString(n, nil); len(fs) > 0 {
			t.Errorf("%q: found %v", n, fs)
		}
	}
}

// cleanTexts are texts that hold numbers and no personal data: order
// numbers, timestamps, ISBNs, IP addresses, versions, UUIDs, prices, ids,
// lists of numbers, measurements. TestPhoneFormats and TestCardsClean
// hold them at no finding.
var cleanTexts = []string{
	"order ORD-2024-000123 shipped", "order #2024-000123", "invoice 2026-11-30-0042", "PO 4500012345",
	"at 2026-11-30T09:00:00Z", "2026-11-30 09:00:00", "30/11/2026 09:00", "11/30/2026", "30.11.2026",
	"1732000000000", "1732000000", "ts=1732000000.123", "took 1234.5678 ms",
	"ISBN 978-3-16-148410-0", "ISBN 0-306-40615-2", "ISBN 978 0 306 40615 7", "ISSN 0317-8471",
	"10.0.12.254", "192.168.100.200:8080", "2001:db8::8a2e:370:7334", "127.0.0.1",
	"v1.24.3", "go1.26.8", "version 12.4.1.2024", "build 20261130.1", "release 2026.11.30",
	"123e4567-e89b-12d3-a456-426614174000", "e89b-12d3", "426614174000", "4266 1417 4000",
	"$1,234.56", "EUR 1.234.567,89", "1 234 567,89 €", "price 12 345 678", "¥ 123 456 789",
	"user id 482913", "account 000123456789", "arn:aws:iam::123456789012:role/deploy",
	"arn:aws:sns:us-east-1:567890123456:topic", "pid 12345 tid 67890", "port 8080-8090",
	"1 2 3 4 5 6 7 8 9 10", "10 20 30 40 50 60", "834 67 1040 46 12", "1920x1080", "lat 52.520008, lon 13.404954",
	"sha 9f86d081884c7d659a2feaa0c55ad015", "page 12 of 345", "room 1204-1206", "pages 123-456",
	"chapter 3.2.1", "call at 09:30", "step 1/2/3", "2026-11-30/2026-12-01", "0000 0000 0000",
	"tracking 1Z999AA10123456784", "(2024) 123-130", "(c) 2026", "f(415) 555", "1234 5678 9012 3456",
	"1234-5678-9012-3456", "[239 191 189]", "Wed Feb 04 21:00:57 -0800 2009", "21:00:57 +1130 2010", "fc:01 787766",
	"4b 03 04 14 00 00", "{-6480181133964513127, -7317004403633452381, 6011544915663598137, 5932255307352610768}",
}

// TestPhoneLibraryBounded: a text full of phone-shaped numbers that are
// none asks the library at most phoneLibBudget times per Scan (its
// allocations, 20 to 150 a check, say how often), and one full of real
// numbers is still found whole past the budget.
func TestPhoneLibraryBounded(t *testing.T) {
	s := New(&Options{Kinds: []Kind{KindPhone}})
	text := strings.Repeat("12 345 678\n123 456 789\n", 5000)
	if n := testing.AllocsPerRun(3, func() { s.ScanString(text, nil) }); n > phoneLibBudget*200 && !raceEnabled {
		t.Errorf("%v allocations for %d candidates", n, 10000)
	}
	real := strings.Repeat("0489 25 37 29, 020 7946 0958\n", 500)
	if fs := s.ScanString(real, nil); len(fs) != 1000 {
		t.Errorf("found %d of 1000", len(fs))
	}
}

// TestPhoneRegionsOption: a national number is taken only in the regions
// asked for; an international one always.
func TestPhoneRegionsOption(t *testing.T) {
	us := New(&Options{PhoneRegions: []string{"US"}})
	if phoneFound(us, "0489 25 37 29") || !phoneFound(us, "415-555-0134") || !phoneFound(us, "+32 489 25 37 29") {
		t.Error("US only: want 415-555-0134 and +32 489 25 37 29, not 0489 25 37 29")
	}
	be := New(&Options{PhoneRegions: []string{"BE", "XX"}})
	if !phoneFound(be, "0489 25 37 29") || phoneFound(be, "415-555-0134") {
		t.Error("BE only: want 0489 25 37 29, not 415-555-0134")
	}
}

// BenchmarkPhoneCandidate is the cost of one candidate's validation, by
// kind of candidate: a national number found in the first region tried,
// one found late in DefaultPhoneRegions, one valid nowhere, and an
// international number.
func BenchmarkPhoneCandidate(b *testing.B) {
	s := New(&Options{Kinds: []Kind{KindPhone}})
	for _, c := range []struct{ name, text string }{
		{"national-first", "415-555-0134"},
		{"national-late", "0489 25 37 29"},
		{"national-invalid", "123-45-6789"},
		{"international", "+46 8 928 571 38"},
		{"international-invalid", "+46 1 234 56"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			dst := make([]Finding, 0, 4)
			for b.Loop() {
				dst = s.ScanString(c.text, dst[:0])
			}
		})
	}
}
