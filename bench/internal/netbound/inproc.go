package netbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/internal/loopback"
)

// IOSize is the unit of every write and read of the bounds: over loopback
// TCP and to and from the node-local files.
const IOSize = 1 << 20

// InProc pushes a Traffic matrix over loopback TCP between plain sockets
// of this one process, with nothing else to do (and, with a Local, the
// node-local cache reads and writes too). It is the "one proc" reference
// next to Procs's bound with one process per node, whose node
// processes use it for their buffers.
type InProc struct {
	bufs [][]byte // IOSize each, touched once and reused across runs
}

// Sample is one timed run: wall time, and what the process used meanwhile.
type Sample struct {
	Wall time.Duration
	Used job.Usage
}

// Buffers returns n buffers, allocating and touching (so the first timed
// run does not pay for page faults) only those it lacks.
func (nb *InProc) Buffers(n int) [][]byte {
	for len(nb.bufs) < n {
		nb.bufs = append(nb.bufs, touched(IOSize))
	}
	return nb.bufs[:n]
}

// conduit is one end of a pair's connection and what crosses it.
type conduit struct {
	conn       *net.TCPConn
	send, recv int64
}

// Run pushes t over loopback TCP once and returns how long it took. Every
// pair of nodes that exchanges bytes gets one connection between their own
// addresses (as the daemons' streams do), and each end has a sender and a
// receiver goroutine, all started together; the time runs from the start
// until the last byte is received. Connecting is not timed. With lio, every
// node also reads its checkpoint file and writes its redundancy file, at the
// same time as the transfers.
func (nb *InProc) Run(ctx context.Context, t Traffic, lio *Local) (Sample, error) {
	if lio != nil && (lio.ring != nil || lio.checked) {
		return Sample{}, errors.New("the xor ring, the checked streams and the fetches run with one process per node (Procs), not in one process")
	}
	var ends []conduit
	defer func() {
		for _, e := range ends {
			e.conn.Close()
		}
	}()
	for a := range t {
		for b := a + 1; b < len(t); b++ {
			if t[a][b] == 0 && t[b][a] == 0 {
				continue
			}
			ca, cb, err := connectPair(ctx, loopback.IP(a), loopback.IP(b))
			if err != nil {
				return Sample{}, err
			}
			ends = append(ends, conduit{ca, t[a][b], t[b][a]}, conduit{cb, t[b][a], t[a][b]})
		}
	}
	// A stuck transfer fails the run instead of hanging it.
	deadline := time.Now().Add(5 * time.Minute)
	for _, e := range ends {
		e.conn.SetDeadline(deadline)
	}
	var jobs []func(buf []byte) error
	for _, e := range ends {
		jobs = append(jobs,
			func(buf []byte) error { return SendN(e.conn, e.send, buf) },
			func(buf []byte) error { return RecvN(e.conn, e.recv, buf) })
	}
	if lio != nil {
		jobs = append(jobs, lio.jobs()...)
		defer lio.Clean()
	}
	bufs := nb.Buffers(len(jobs))
	u0 := ProcessUsage()
	t0 := time.Now()
	err := runAll(jobs, bufs)
	s := Sample{Wall: time.Since(t0), Used: ProcessUsage().Sub(u0)}
	if err != nil {
		return Sample{}, fmt.Errorf("loopback transfer: %w", err)
	}
	return s, nil
}

// touched returns n bytes, every page written, so that a timed run does
// not pay for their first touch.
func touched(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

// runAll runs every job at once, each on its own goroutine with its own
// buffer, and returns their errors.
func runAll(jobs []func(buf []byte) error, bufs [][]byte) error {
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, job := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = job(bufs[i])
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ProcessUsage returns what this process used so far.
func ProcessUsage() job.Usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return job.Usage{}
	}
	return job.Usage{CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), Faults: ru.Minflt + ru.Majflt}
}

// connectPair returns the two ends of a TCP connection from host a to host b.
func connectPair(ctx context.Context, a, b string) (*net.TCPConn, *net.TCPConn, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(b, "0"))
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(a)}, Timeout: 10 * time.Second}
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	ca, err := d.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		ln.Close()
		if acc := <-ch; acc.c != nil {
			acc.c.Close()
		}
		return nil, nil, fmt.Errorf("dial %s from %s: %w", b, a, err)
	}
	acc := <-ch
	if acc.err != nil {
		ca.Close()
		return nil, nil, fmt.Errorf("accept on %s: %w", b, acc.err)
	}
	return ca.(*net.TCPConn), acc.c.(*net.TCPConn), nil
}

// SendN writes n bytes of buf, IOSize at a time.
func SendN(c *net.TCPConn, n int64, buf []byte) error {
	for n > 0 {
		w, err := c.Write(buf[:min(n, int64(len(buf)))])
		if err != nil {
			return err
		}
		n -= int64(w)
	}
	return nil
}

// RecvN reads exactly n bytes into buf, IOSize at a time at most.
func RecvN(c *net.TCPConn, n int64, buf []byte) error {
	for n > 0 {
		r, err := c.Read(buf[:min(n, int64(len(buf)))])
		if err != nil {
			return fmt.Errorf("%d bytes short: %w", n, err)
		}
		n -= int64(r)
	}
	return nil
}

// Walls returns the wall times of samples.
func Walls(v []Sample) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, s := range v {
		out[i] = s.Wall
	}
	return out
}

// CPUs returns the CPU times of samples.
func CPUs(v []Sample) []time.Duration {
	out := make([]time.Duration, len(v))
	for i, s := range v {
		out[i] = s.Used.CPU
	}
	return out
}

// faults returns the page faults of samples.
func Faults(v []Sample) []int64 {
	out := make([]int64, len(v))
	for i, s := range v {
		out[i] = s.Used.Faults
	}
	return out
}
