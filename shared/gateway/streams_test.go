package gateway

import (
	"fmt"
	"sync"
	"testing"
)

// TestStreamSlots: a key holds at most MaxStreamsPerKey streams and the
// instance MaxStreams; a release gives back one slot, once; an entry
// leaves the map with its key's last stream.
func TestStreamSlots(t *testing.T) {
	var s streamSlots
	var rel []func()
	for i := range MaxStreamsPerKey {
		r, ok := s.take("t/a")
		if !ok {
			t.Fatalf("stream %d of key a refused", i+1)
		}
		rel = append(rel, r)
	}
	if _, ok := s.take("t/a"); ok {
		t.Fatalf("key a got stream %d, want at most %d", MaxStreamsPerKey+1, MaxStreamsPerKey)
	}
	rb, ok := s.take("t/b")
	if !ok {
		t.Fatal("another key refused while key a is full")
	}
	rel[0]()
	rel[0]() // a second release gives back nothing more
	if mine, all := s.open("t/a"); mine != MaxStreamsPerKey-1 || all != MaxStreamsPerKey {
		t.Fatalf("after one release: key a %d, all %d; want %d and %d", mine, all, MaxStreamsPerKey-1, MaxStreamsPerKey)
	}
	if _, ok := s.take("t/a"); !ok {
		t.Fatal("key a refused after a release")
	}
	rb()
	if _, ok := s.byKey["t/b"]; ok {
		t.Fatal("key b still in the map after its last stream")
	}
}

// TestStreamSlotsTotal: MaxStreams bounds the instance whatever the keys,
// under concurrent takes.
func TestStreamSlotsTotal(t *testing.T) {
	var s streamSlots
	var mu sync.Mutex
	var rel []func()
	var wg sync.WaitGroup
	for k := range MaxStreams/MaxStreamsPerKey + 10 {
		for range MaxStreamsPerKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if r, ok := s.take(fmt.Sprint("t/", k)); ok {
					mu.Lock()
					rel = append(rel, r)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(rel) != MaxStreams {
		t.Fatalf("%d streams taken, want exactly %d", len(rel), MaxStreams)
	}
	for _, r := range rel {
		wg.Add(1)
		go func() { defer wg.Done(); r() }()
	}
	wg.Wait()
	if _, all := s.open(""); all != 0 || len(s.byKey) != 0 {
		t.Fatalf("after every release: %d open, %d keys", all, len(s.byKey))
	}
}

// open is how many streams key and the instance hold now.
func (s *streamSlots) open(key string) (mine, all int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key], s.total
}
