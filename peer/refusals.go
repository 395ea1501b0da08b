package peer

import (
	"cmp"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Inbound connections that have not authenticated yet are bounded twice: at
// most maxHandshakes in all, so a flood of idle sockets costs a bounded
// number of goroutines, and at most maxHandshakesPerHost from one address,
// so a flood from one address (which holds its slots for up to IOTimeout)
// cannot take the slots the job's own nodes need to link.
const (
	maxHandshakes        = 64
	maxHandshakesPerHost = 8
)

// handshakeSlots counts the handshakes in progress, in all and per address.
type handshakeSlots struct {
	mu      sync.Mutex // protects the fields below
	total   int
	perHost map[string]int
}

// acquire takes a slot for a connection from host, or says why not.
func (s *handshakeSlots) acquire(host string) (ok bool, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.total >= maxHandshakes:
		return false, fmt.Sprintf("%d handshakes already in progress", maxHandshakes)
	case s.perHost[host] >= maxHandshakesPerHost:
		return false, fmt.Sprintf("%d handshakes from %s already in progress", maxHandshakesPerHost, host)
	}
	if s.perHost == nil {
		s.perHost = make(map[string]int)
	}
	s.total++
	s.perHost[host]++
	return true, ""
}

// release gives back a slot acquire took for host.
func (s *handshakeSlots) release(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total--
	if s.perHost[host]--; s.perHost[host] <= 0 {
		delete(s.perHost, host)
	}
}

// refusalEvery is how often the refusal log may repeat a line for the same
// key, and how often it writes its summary of what it held back. A
// variable so that tests can shorten it before starting a Node.
var refusalEvery = 30 * time.Second

// maxRefusalWarns bounds the refusal lines logged one by one per interval,
// whatever the keys: keys are chosen by whoever connects.
const maxRefusalWarns = 16

// maxRefusalSources bounds the addresses a summary counts separately.
const maxRefusalSources = 64

// refusalLog rate-limits the log lines about refused and failed inbound
// connections. The first refusal of each kind (a key: reason and address,
// or claimed node and verdict) in an interval is logged at Warn, up to
// maxRefusalWarns lines; everything else is only counted, and once per
// interval a single summary line gives the counts by reason and the
// busiest addresses. So a flood of tens of thousands of connections writes
// a few lines a minute while the metrics still count each one.
type refusalLog struct {
	log *slog.Logger

	mu       sync.Mutex           // protects the fields below
	lastWarn map[string]time.Time // last Warn line per key
	warns    int                  // Warn lines in this interval
	held     map[string]int       // lines held back this interval, by reason
	sources  map[string]int       // lines held back this interval, by address
	others   int                  // held back from addresses beyond maxRefusalSources
}

func newRefusalLog(log *slog.Logger) *refusalLog {
	return &refusalLog{log: log, lastWarn: map[string]time.Time{}, held: map[string]int{}, sources: map[string]int{}}
}

// note logs msg (with args) at Warn unless the limits say otherwise, in
// which case it counts the line under reason and host for the summary.
func (r *refusalLog) note(key, reason, host, msg string, args ...any) {
	now := time.Now()
	r.mu.Lock()
	last, seen := r.lastWarn[key]
	if (!seen || now.Sub(last) >= refusalEvery) && r.warns < maxRefusalWarns {
		if len(r.lastWarn) >= 1024 {
			clear(r.lastWarn) // keys are peer-chosen: bound the map
		}
		r.lastWarn[key] = now
		r.warns++
		r.mu.Unlock()
		r.log.Warn(msg, args...)
		return
	}
	r.holdLocked(reason, host)
	r.mu.Unlock()
}

// count counts a connection that is not worth a line of its own (a port
// probe that closed before saying anything) towards the summary.
func (r *refusalLog) count(reason, host string) {
	r.mu.Lock()
	r.holdLocked(reason, host)
	r.mu.Unlock()
}

// holdLocked counts a line held back for the summary. r.mu must be held.
func (r *refusalLog) holdLocked(reason, host string) {
	r.held[reason]++
	switch {
	case host == "":
	case r.sources[host] > 0 || len(r.sources) < maxRefusalSources:
		r.sources[host]++
	default:
		r.others++
	}
}

// summarize logs what was held back since the last summary, if anything,
// and starts a new interval.
func (r *refusalLog) summarize() {
	r.mu.Lock()
	held, sources, others := r.held, r.sources, r.others
	r.held, r.sources, r.others, r.warns = map[string]int{}, map[string]int{}, 0, 0
	r.mu.Unlock()
	total := 0
	for _, c := range held {
		total += c
	}
	if total == 0 {
		return
	}
	reasons := slices.Sorted(maps.Keys(held))
	var byReason []string
	for _, k := range reasons {
		byReason = append(byReason, fmt.Sprintf("%s=%d", k, held[k]))
	}
	hosts := slices.SortedFunc(maps.Keys(sources), func(a, b string) int {
		return cmp.Or(cmp.Compare(sources[b], sources[a]), cmp.Compare(a, b))
	})
	var top []string
	for _, h := range hosts[:min(len(hosts), 5)] {
		top = append(top, fmt.Sprintf("%s=%d", h, sources[h]))
	}
	if rest := len(hosts) - len(top); rest > 0 {
		top = append(top, fmt.Sprintf("%d more addresses", rest))
	}
	if others > 0 {
		top = append(top, fmt.Sprintf("%d from addresses not counted apart", others))
	}
	r.log.Warn(fmt.Sprintf("peer port: %d more inbound connections refused or dropped in the last %v, not logged one by one (%s)",
		total, refusalEvery, strings.Join(byReason, ", ")),
		"suppressed", total, "reasons", strings.Join(byReason, ","), "sources", strings.Join(top, ","))
}
