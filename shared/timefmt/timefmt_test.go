package timefmt

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// times are the cases every test checks: whole seconds, trailing zeros in
// the fraction, one nanosecond, the edges of four-digit years, and
// locations with and without an offset (one of zero offset that is not
// UTC, and one with a sub-hour offset).
func times(t *testing.T) []time.Time {
	t.Helper()
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("X", 0), time.FixedZone("IST", 5*3600+30*60), time.FixedZone("W", -7*3600)}
	if ny, err := time.LoadLocation("America/New_York"); err == nil {
		zones = append(zones, ny)
	}
	base := []time.Time{
		time.Date(2026, 12, 1, 22, 15, 29, 0, time.UTC),
		time.Date(2026, 12, 1, 22, 15, 29, 1, time.UTC),
		time.Date(2026, 12, 1, 22, 15, 29, 120000000, time.UTC),
		time.Date(2026, 12, 1, 22, 15, 29, 999999999, time.UTC),
		time.Date(2026, 3, 8, 6, 59, 59, 500, time.UTC), // New York's change to summer time is at 07:00 UTC
		time.Date(2026, 3, 8, 7, 0, 0, 500, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 10, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999990, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 5, time.UTC),
		time.Date(-1, 6, 1, 0, 0, 0, 5, time.UTC),
		time.Unix(0, 0),
		time.Now(),
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		base = append(base, time.Unix(r.Int64N(4e9), r.Int64N(1e9)))
	}
	var out []time.Time
	for _, b := range base {
		for _, z := range zones {
			out = append(out, b.In(z))
		}
	}
	return out
}

func TestAppendRFC3339Nano(t *testing.T) {
	for _, tm := range times(t) {
		// Twice: the first call of a second fills the cache, the second reads it.
		for range 2 {
			if got, want := string(AppendRFC3339Nano([]byte("x"), tm)), "x"+tm.Format(time.RFC3339Nano); got != want {
				t.Fatalf("%v: got %q, want %q", tm, got, want)
			}
		}
	}
}

func TestAppendSortTime(t *testing.T) {
	for _, tm := range times(t) {
		for range 2 {
			if got, want := string(AppendSortTime([]byte("x"), tm)), "x"+tm.UTC().Format(SortLayout); got != want {
				t.Fatalf("%v: got %q, want %q", tm, got, want)
			}
		}
	}
}

// TestConcurrentSeconds has goroutines format times of different seconds
// and locations at once, so that the cache is replaced under readers (run
// with -race).
func TestConcurrentSeconds(t *testing.T) {
	ts := times(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 2000 {
				tm := ts[(g*131+i)%len(ts)]
				if got, want := string(AppendRFC3339Nano(nil, tm)), tm.Format(time.RFC3339Nano); got != want {
					t.Errorf("%v: got %q, want %q", tm, got, want)
					return
				}
				if got, want := string(AppendSortTime(nil, tm)), tm.UTC().Format(SortLayout); got != want {
					t.Errorf("%v: got %q, want %q", tm, got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkAppend(b *testing.B) {
	buf := make([]byte, 0, 64)
	now := time.Now()
	b.Run("AppendFormat", func(b *testing.B) {
		for i := range b.N {
			buf = now.Add(time.Duration(i)).AppendFormat(buf[:0], time.RFC3339Nano)
		}
	})
	b.Run("AppendRFC3339Nano", func(b *testing.B) {
		for i := range b.N {
			buf = AppendRFC3339Nano(buf[:0], now.Add(time.Duration(i)))
		}
	})
	b.Run("SortTimeAppendFormat", func(b *testing.B) {
		for i := range b.N {
			buf = now.Add(time.Duration(i)).UTC().AppendFormat(buf[:0], SortLayout)
		}
	})
	b.Run("AppendSortTime", func(b *testing.B) {
		for i := range b.N {
			buf = AppendSortTime(buf[:0], now.Add(time.Duration(i)))
		}
	})
}
