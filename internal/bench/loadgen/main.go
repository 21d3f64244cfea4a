// Command loadgen drives the benchmark of docs/perf/upstream.md: C workers,
// each on its own MCP session (initialize, notifications/initialized), send
// one cheap tools/call after another; after a warm-up, N recorded calls
// give throughput and p50/p99 latency. With -pid it reads the CPU time
// (user+system, /proc/PID/stat) that process spent during the recorded
// phase and reports it per 10,000 calls. Output: one JSON line.
//
// With several -target flags the targets take turns of -chunk recorded
// calls each (one JSON line per target at the end), so that the noise of a
// shared host is spread over all of them rather than landing on whichever
// ran in a slow minute.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	Label        string  `json:"label"`
	Concurrency  int     `json:"concurrency"`
	Calls        int     `json:"calls"`
	Seconds      float64 `json:"seconds"`
	Throughput   float64 `json:"calls_per_sec"`
	P50ms        float64 `json:"p50_ms"`
	P99ms        float64 `json:"p99_ms"`
	CPUPer10k    float64 `json:"cpu_s_per_10k,omitempty"`
	ProxyRSSMB   float64 `json:"proxy_rss_mb,omitempty"`
	Errors       int64   `json:"errors"`
	ProtocolSeen string  `json:"protocol"`
}

// target is one endpoint under load: its sessions, and what its
// recorded calls measured.
type target struct {
	label, url, key string
	pid             int
	sessions        []string
	proto           string
	lat             []time.Duration
	elapsed         time.Duration
	errs            atomic.Int64
	cpu0            float64
}

func main() {
	url := flag.String("url", "", "MCP endpoint (one target; or -target)")
	key := flag.String("key", "", "bearer token (aegis), for -url")
	conc := flag.Int("c", 1, "concurrency (workers, one session each)")
	n := flag.Int("n", 20000, "recorded calls (per target)")
	warm := flag.Int("warmup", 2000, "warm-up calls (per target)")
	chunk := flag.Int("chunk", 0, "with several targets, recorded calls per turn (0: n, one turn each)")
	tool := flag.String("tool", "test_simple_text", "tool to call")
	args := flag.String("args", `{}`, "tool arguments (JSON object)")
	pid := flag.Int("pid", 0, "process whose CPU time is measured, for -url")
	label := flag.String("label", "", "label for the output, for -url")
	var targets []*target
	flag.Func("target", "label=URL[,pid=N][,key=TOKEN], repeatable: the targets take turns", func(v string) error {
		t, err := parseTarget(v)
		if err != nil {
			return err
		}
		targets = append(targets, t)
		return nil
	})
	flag.Parse()
	if *url != "" {
		targets = append(targets, &target{label: *label, url: *url, key: *key, pid: *pid})
	}
	if len(targets) == 0 {
		log.Fatal("no target: give -url or -target")
	}
	if *chunk <= 0 || *chunk > *n {
		*chunk = *n
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	for _, t := range targets {
		t.sessions = make([]string, *conc)
		for i := range t.sessions {
			s, p, err := initialize(client, t.url, t.key)
			if err != nil {
				log.Fatalf("%s: initialize: %v", t.label, err)
			}
			t.sessions[i], t.proto = s, p
		}
	}
	body := func(id int64) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"tools/call","params":{"name":"` + *tool + `","arguments":` + *args + `}}`)
	}
	// run sends total calls to t from its workers and returns their
	// latencies and the time they took.
	run := func(t *target, total int, first int64) ([]time.Duration, time.Duration) {
		var next atomic.Int64
		lat := make([]time.Duration, total)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < *conc; w++ {
			wg.Add(1)
			go func(sess string) {
				defer wg.Done()
				for {
					i := next.Add(1) - 1
					if i >= int64(total) {
						return
					}
					s := time.Now()
					if err := call(client, t.url, t.key, sess, t.proto, body(first+i)); err != nil {
						if t.errs.Add(1) < 5 {
							log.Printf("%s: call: %v", t.label, err)
						}
					}
					lat[i] = time.Since(s)
				}
			}(t.sessions[w])
		}
		wg.Wait()
		return lat, time.Since(start)
	}
	for _, t := range targets {
		run(t, *warm, 10)
		t.errs.Store(0)
	}
	// The targets take turns of chunk calls, each turn starting with the
	// next target, so that a slow minute of a shared host lands on all of
	// them. A process's CPU time is read before its first turn and after
	// the last turn of all: the work it does after a turn (a batched
	// write, a background read) is counted, and so is anything it spends
	// while the others run (an idle gateway spends none).
	for _, t := range targets {
		t.cpu0 = cpuSeconds(t.pid)
	}
	for turn, done := 0, 0; done < *n; turn++ {
		size := min(*chunk, *n-done)
		for j := range targets {
			t := targets[(turn+j)%len(targets)]
			lat, el := run(t, size, int64(*warm+10+done))
			t.lat = append(t.lat, lat...)
			t.elapsed += el
		}
		done += size
	}
	for _, t := range targets {
		cpu1 := cpuSeconds(t.pid)
		sort.Slice(t.lat, func(i, j int) bool { return t.lat[i] < t.lat[j] })
		r := result{
			Label: t.label, Concurrency: *conc, Calls: *n, Seconds: t.elapsed.Seconds(),
			Throughput: float64(*n) / t.elapsed.Seconds(),
			P50ms:      ms(t.lat[len(t.lat)/2]), P99ms: ms(t.lat[len(t.lat)*99/100]),
			Errors: t.errs.Load(), ProtocolSeen: t.proto,
		}
		if t.pid > 0 {
			r.CPUPer10k = (cpu1 - t.cpu0) * 10000 / float64(*n)
			r.ProxyRSSMB = rssMB(t.pid)
		}
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
	}
}

// parseTarget reads label=URL[,pid=N][,key=TOKEN].
func parseTarget(v string) (*target, error) {
	label, rest, ok := strings.Cut(v, "=")
	if !ok || label == "" {
		return nil, fmt.Errorf("target %q: want label=URL[,pid=N][,key=TOKEN]", v)
	}
	parts := strings.Split(rest, ",")
	t := &target{label: label, url: parts[0]}
	for _, p := range parts[1:] {
		k, val, _ := strings.Cut(p, "=")
		switch k {
		case "pid":
			n, err := strconv.Atoi(val)
			if err != nil {
				return nil, fmt.Errorf("target %s: pid %q is not a number", label, val)
			}
			t.pid = n
		case "key":
			t.key = val
		default:
			return nil, fmt.Errorf("target %s: unknown field %q (want pid or key)", label, k)
		}
	}
	return t, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func post(c *http.Client, url, key, sess, proto string, body []byte) (*http.Response, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if sess != "" {
		req.Header.Set("Mcp-Session-Id", sess)
	}
	if proto != "" {
		req.Header.Set("MCP-Protocol-Version", proto)
	}
	return c.Do(req)
}

func initialize(c *http.Client, url, key string) (string, string, error) {
	resp, err := post(c, url, key, "", "", []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"loadgen","version":"1"}}}`))
	if err != nil {
		return "", "", err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return "", "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	sess := resp.Header.Get("Mcp-Session-Id")
	proto := "2025-11-25"
	if i := bytes.Index(b, []byte(`"protocolVersion":"`)); i >= 0 {
		rest := b[i+len(`"protocolVersion":"`):]
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			proto = string(rest[:j])
		}
	}
	resp, err = post(c, url, key, sess, proto, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return "", "", err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return sess, proto, nil
}

func call(c *http.Client, url, key, sess, proto string, body []byte) error {
	resp, err := post(c, url, key, sess, proto, body)
	if err != nil {
		return err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte(`"result"`)) {
		return fmt.Errorf("HTTP %d: %.200s", resp.StatusCode, b)
	}
	return nil
}

// cpuSeconds is utime+stime of pid (0 when pid is 0 or unreadable).
func cpuSeconds(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

func rssMB(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}
