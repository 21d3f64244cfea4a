package killswitch

import (
	"sort"
	"strings"
	"unicode/utf8"
)

// MaxNear is how many near matches Near returns at most.
const MaxNear = 5

// Near returns the names among names that an operator who typed name may
// have meant, closest first, at most MaxNear: those equal to name but for
// letter case, then those within a small edit distance of it (one edit per
// three characters, at least one), compared without letter case. A name
// equal to name itself is not a near match. Near is pure: it is what the
// admin API lists when a stop names no tool (docs/admin.md).
func Near(name string, names []string) []string {
	type cand struct {
		name string
		dist int
	}
	lower := strings.ToLower(name)
	limit := max(1, (utf8.RuneCountInString(name)+1)/3)
	seen := map[string]bool{}
	var cs []cand
	for _, n := range names {
		if n == name || seen[n] {
			continue
		}
		seen[n] = true
		ln := strings.ToLower(n)
		d := distance(lower, ln)
		// A tool's own name inside an exposed one ("echo" for "a.echo")
		// is a near match whatever the distance.
		if _, tail, ok := strings.Cut(ln, "."); ok && (tail == lower || strings.HasSuffix(ln, "."+lower)) {
			d = min(d, 1)
		}
		if d <= limit {
			cs = append(cs, cand{n, d})
		}
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].dist != cs[j].dist {
			return cs[i].dist < cs[j].dist
		}
		return cs[i].name < cs[j].name
	})
	out := make([]string, 0, min(len(cs), MaxNear))
	for i := 0; i < len(cs) && i < MaxNear; i++ {
		out = append(out, cs[i].name)
	}
	return out
}

// distance is the edit distance between a and b over runes, counting an
// insertion, a deletion, a substitution and a swap of two neighbours as one
// edit each (optimal string alignment).
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
