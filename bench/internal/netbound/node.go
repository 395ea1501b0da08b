package netbound

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// The network bound with one process per node: the driver starts itself
// once per node in the hidden "netnode" mode, and each such process plays
// one node of the Traffic matrix, so the bound pays for the same process
// and thread switching as N daemons sharing the machine's cores do. The
// driver and a node process talk over the node's stdin and stdout, one line
// each way per step:
//
//	node → driver   listening PORT
//	driver → node   peers ADDR0,ADDR1,…
//	node → driver   ready                      (connections up, buffers touched)
//	driver → node   go
//	node → driver   done CPU_NS FAULTS         (what the node used while timed)
//
// or "error TEXT" instead of any node line.

// NodeArg is the hidden first argument that selects the node mode.
const NodeArg = "netnode"

// nodeSpec is what one node process does.
type nodeSpec struct {
	index      int
	host       string
	send, recv []int64 // bytes to and from each node
	readPath   string  // checkpoint to read, "" for none
	readN      int64
	writePath  string // redundancy file to write and fsync, "" for none
	writeN     int64
	ring       XORRing // with a checkpoint and a redundancy file: run XOR's ring instead of the streams
	checked    bool    // the streams with an encode's checks (Local.WithChecks)
	stagePath  string  // with the ring: fetch the checkpoint (on disk) into this staged copy (Local.WithFetch)
	fetchAlone bool    // with stagePath: fetch only, in the ring's streams
}

func (s nodeSpec) args() []string {
	a := []string{NodeArg,
		"-index", strconv.Itoa(s.index), "-host", s.host,
		"-send", joinInts(s.send), "-recv", joinInts(s.recv)}
	if s.readPath != "" {
		a = append(a, "-read", s.readPath, "-readn", strconv.FormatInt(s.readN, 10))
	}
	if s.writePath != "" {
		a = append(a, "-write", s.writePath, "-writen", strconv.FormatInt(s.writeN, 10))
	}
	if s.ring.Chunk > 0 {
		a = append(a, "-ring-chunk", strconv.FormatInt(s.ring.Chunk, 10), "-ring-piece", strconv.Itoa(s.ring.Piece))
	}
	if s.checked {
		a = append(a, "-checked")
	}
	if s.stagePath != "" {
		a = append(a, "-stage", s.stagePath)
	}
	if s.fetchAlone {
		a = append(a, "-fetch-alone")
	}
	return a
}

// NodeMain runs one node process; it returns the exit status.
func NodeMain(args []string, stdin io.Reader, stdout io.Writer) int {
	fs := flag.NewFlagSet(NodeArg, flag.ContinueOnError)
	var s nodeSpec
	var send, recv string
	fs.IntVar(&s.index, "index", 0, "")
	fs.StringVar(&s.host, "host", "", "")
	fs.StringVar(&send, "send", "", "")
	fs.StringVar(&recv, "recv", "", "")
	fs.StringVar(&s.readPath, "read", "", "")
	fs.Int64Var(&s.readN, "readn", 0, "")
	fs.StringVar(&s.writePath, "write", "", "")
	fs.Int64Var(&s.writeN, "writen", 0, "")
	fs.Int64Var(&s.ring.Chunk, "ring-chunk", 0, "")
	fs.IntVar(&s.ring.Piece, "ring-piece", 0, "")
	fs.BoolVar(&s.checked, "checked", false, "")
	fs.StringVar(&s.stagePath, "stage", "", "")
	fs.BoolVar(&s.fetchAlone, "fetch-alone", false, "")
	err := fs.Parse(args)
	if err == nil {
		s.send, err = splitInts(send)
	}
	if err == nil {
		s.recv, err = splitInts(recv)
	}
	if err == nil && (len(s.send) != len(s.recv) || s.index < 0 || s.index >= len(s.send)) {
		err = fmt.Errorf("node %d: bad Traffic row", s.index)
	}
	if err == nil {
		err = runNode(s, bufio.NewReader(stdin), stdout)
	}
	if err != nil {
		fmt.Fprintf(stdout, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return 1
	}
	return 0
}

func runNode(s nodeSpec, in *bufio.Reader, out io.Writer) error {
	ln, err := net.Listen("tcp", net.JoinHostPort(s.host, "0"))
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Fprintf(out, "listening %d\n", ln.Addr().(*net.TCPAddr).Port)
	line, err := in.ReadString('\n')
	peers, ok := strings.CutPrefix(strings.TrimSpace(line), "peers ")
	if err != nil || !ok {
		return fmt.Errorf("node %d: expected peers, got %q (%v)", s.index, line, err)
	}
	addrs := strings.Split(peers, ",")
	if len(addrs) != len(s.send) {
		return fmt.Errorf("node %d: %d peers for %d nodes", s.index, len(addrs), len(s.send))
	}
	conns, err := connectNode(s, ln, addrs)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	if err != nil {
		return err
	}
	if s.ring.Chunk > 0 {
		return runRingNode(s, conns, in, out)
	}
	var jobs []func([]byte) error
	for j, c := range conns {
		if c == nil {
			continue
		}
		jobs = append(jobs,
			func(buf []byte) error { return SendN(c, s.send[j], buf) },
			func(buf []byte) error { return RecvN(c, s.recv[j], buf) })
	}
	// With checks, the CRC32Cs of what is read and what is written, as
	// an encode takes them (nil: none).
	var readSum, writeSum *uint32
	if s.checked {
		if s.readPath == "" || s.writePath == "" {
			return fmt.Errorf("node %d: the checked streams need a checkpoint and a redundancy file", s.index)
		}
		if err := rewrite(s.readPath); err != nil {
			return err
		}
		readSum, writeSum = new(uint32), new(uint32)
	}
	if s.readPath != "" {
		jobs = append(jobs, func(buf []byte) error { return readN(s.readPath, s.readN, buf, readSum) })
	}
	if s.writePath != "" {
		jobs = append(jobs, func(buf []byte) error { return writeN(s.writePath, s.writeN, buf, true, writeSum) })
	}
	var nb InProc
	bufs := nb.Buffers(len(jobs))
	return timed(s.index, in, out, func() error { return runAll(jobs, bufs) })
}

// runRingNode plays the node's member of an XORRing, over a checkpoint
// written just before in the cache or fetched from disk (stagePath), or
// only fetches it (fetchAlone).
func runRingNode(s nodeSpec, conns []*net.TCPConn, in *bufio.Reader, out io.Writer) error {
	p := len(conns)
	if s.readPath == "" || s.writePath == "" {
		return fmt.Errorf("node %d: the xor ring needs a checkpoint and a redundancy file", s.index)
	}
	if s.stagePath != "" {
		fs, err := openFetch(s.readPath, s.stagePath, s.ring.Chunk, p-1)
		if err != nil {
			return err
		}
		if s.fetchAlone {
			defer fs.close()
			bufs := make([][]byte, p-1)
			for k := range bufs {
				bufs[k] = touched(s.ring.Piece)
			}
			return timed(s.index, in, out, func() error { return fetchAlone(fs, s.ring.Chunk, bufs) })
		}
		return runRing(s, conns, fs, in, out)
	}
	cs, err := openCache(s.readPath)
	if err != nil {
		return err
	}
	return runRing(s, conns, cs, in, out)
}

// runRing runs the node's member of the ring over src, which it closes.
func runRing(s nodeSpec, conns []*net.TCPConn, src source, in *bufio.Reader, out io.Writer) error {
	p := len(conns)
	left, right := conns[(s.index+p-1)%p], conns[(s.index+1)%p]
	if left == nil || right == nil {
		src.close()
		return fmt.Errorf("node %d: the xor ring needs both neighbours", s.index)
	}
	m, err := newRingMember(s.ring, s.index, p, left, right, src, s.writePath)
	if err != nil {
		return err
	}
	defer m.close()
	return timed(s.index, in, out, m.run)
}

// timed says the node is ready, waits for the driver's go, runs work and
// reports the CPU time and page faults it took.
func timed(index int, in *bufio.Reader, out io.Writer, work func() error) error {
	fmt.Fprintln(out, "ready")
	if line, err := in.ReadString('\n'); err != nil || strings.TrimSpace(line) != "go" {
		return fmt.Errorf("node %d: expected go, got %q (%v)", index, line, err)
	}
	u0 := ProcessUsage()
	err := work()
	u := ProcessUsage().Sub(u0)
	if err != nil {
		return fmt.Errorf("node %d: %w", index, err)
	}
	fmt.Fprintf(out, "done %d %d\n", u.CPU.Nanoseconds(), u.Faults)
	return nil
}

// connectNode opens one connection to every node this one exchanges bytes
// with: it dials those with a higher index (saying who it is in 4 bytes)
// and accepts those with a lower one.
func connectNode(s nodeSpec, ln net.Listener, addrs []string) ([]*net.TCPConn, error) {
	conns := make([]*net.TCPConn, len(addrs))
	var want int
	for j := range addrs {
		if j < s.index && s.send[j]+s.recv[j] > 0 {
			want++
		}
	}
	ln.(*net.TCPListener).SetDeadline(time.Now().Add(time.Minute))
	accErr := make(chan error, 1)
	accepted := make([]*net.TCPConn, len(addrs))
	go func() {
		for range want {
			c, err := ln.Accept()
			if err != nil {
				accErr <- err
				return
			}
			var id [4]byte
			c.SetReadDeadline(time.Now().Add(time.Minute))
			if _, err := io.ReadFull(c, id[:]); err != nil {
				c.Close()
				accErr <- err
				return
			}
			c.SetReadDeadline(time.Time{})
			j := int(binary.LittleEndian.Uint32(id[:]))
			if j >= s.index || accepted[j] != nil {
				c.Close()
				accErr <- fmt.Errorf("node %d: unexpected connection from %d", s.index, j)
				return
			}
			accepted[j] = c.(*net.TCPConn)
		}
		accErr <- nil
	}()
	var dialErr error
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(s.host)}, Timeout: 10 * time.Second}
	for j := s.index + 1; j < len(addrs) && dialErr == nil; j++ {
		if s.send[j]+s.recv[j] == 0 {
			continue
		}
		c, err := d.DialContext(context.Background(), "tcp", addrs[j])
		if err != nil {
			dialErr = err
			break
		}
		var id [4]byte
		binary.LittleEndian.PutUint32(id[:], uint32(s.index))
		if _, err := c.Write(id[:]); err != nil {
			c.Close()
			dialErr = err
			break
		}
		conns[j] = c.(*net.TCPConn)
	}
	if dialErr != nil {
		ln.Close() // ends the accept loop
	}
	err := errors.Join(dialErr, <-accErr)
	for j, c := range accepted {
		if c != nil {
			conns[j] = c
		}
	}
	return conns, err
}

func joinInts(v []int64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.FormatInt(x, 10)
	}
	return strings.Join(s, ",")
}

func splitInts(s string) ([]int64, error) {
	var out []int64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("bad byte count %q", f)
		}
		out = append(out, v)
	}
	return out, nil
}
