// Command loadgen drives the benchmark of docs/perf/upstream.md: C workers,
// each on its own MCP session (initialize, notifications/initialized), send
// one cheap tools/call after another; after a warm-up, N recorded calls
// give throughput and p50/p99 latency. With -pid it reads the CPU time
// (user+system, /proc/PID/stat) that process spent during the recorded
// phase and reports it per 10,000 calls. Output: one JSON line.
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

func main() {
	url := flag.String("url", "", "MCP endpoint")
	key := flag.String("key", "", "bearer token (aegis)")
	conc := flag.Int("c", 1, "concurrency (workers, one session each)")
	n := flag.Int("n", 20000, "recorded calls")
	warm := flag.Int("warmup", 2000, "warm-up calls")
	tool := flag.String("tool", "test_simple_text", "tool to call")
	args := flag.String("args", `{}`, "tool arguments (JSON object)")
	pid := flag.Int("pid", 0, "process whose CPU time is measured")
	label := flag.String("label", "", "label for the output")
	flag.Parse()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxIdleConns: 256}}
	sessions := make([]string, *conc)
	var proto string
	for i := range sessions {
		s, p, err := initialize(client, *url, *key)
		if err != nil {
			log.Fatalf("initialize: %v", err)
		}
		sessions[i], proto = s, p
	}
	body := func(id int64) []byte {
		return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) + `,"method":"tools/call","params":{"name":"` + *tool + `","arguments":` + *args + `}}`)
	}
	var errs atomic.Int64
	run := func(total int, record bool) ([]time.Duration, time.Duration) {
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
					t := time.Now()
					if err := call(client, *url, *key, sess, proto, body(i+10)); err != nil {
						errs.Add(1)
						if errs.Load() < 5 {
							log.Printf("call: %v", err)
						}
					}
					lat[i] = time.Since(t)
				}
			}(sessions[w])
		}
		wg.Wait()
		return lat, time.Since(start)
	}
	run(*warm, false)
	errs.Store(0)
	cpu0 := cpuSeconds(*pid)
	lat, elapsed := run(*n, true)
	cpu1 := cpuSeconds(*pid)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	r := result{
		Label: *label, Concurrency: *conc, Calls: *n, Seconds: elapsed.Seconds(),
		Throughput: float64(*n) / elapsed.Seconds(),
		P50ms:      ms(lat[len(lat)/2]), P99ms: ms(lat[len(lat)*99/100]),
		Errors: errs.Load(), ProtocolSeen: proto,
	}
	if *pid > 0 {
		r.CPUPer10k = (cpu1 - cpu0) * 10000 / float64(*n)
		r.ProxyRSSMB = rssMB(*pid)
	}
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
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
