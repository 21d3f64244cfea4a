//go:build race

package scan

// raceEnabled: the race detector empties sync.Pool at random.
const raceEnabled = true
