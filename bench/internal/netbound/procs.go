package netbound

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"time"

	"github.com/scrfs/scrfs/bench/internal/job"
	"github.com/scrfs/scrfs/internal/loopback"
)

// Runner runs a Traffic matrix (with a node's cache I/O when lio is not
// nil) once and times it.
type Runner interface {
	Run(ctx context.Context, t Traffic, lio *Local) (Sample, error)
}

// Procs runs the bound with one process per node (node.go).
type Procs struct {
	// Self is this program's executable, which must call NodeMain when
	// its first argument is NodeArg.
	Self string
}

// nodeProc is the driver's handle on one node process.
type nodeProc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr bytes.Buffer
}

// expect reads the node's next line, which must start with word.
func (np *nodeProc) expect(q int, word string) (string, error) {
	if !np.out.Scan() {
		return "", fmt.Errorf("node process %d ended before %q: %s", q, word, strings.TrimSpace(np.stderr.String()))
	}
	line := np.out.Text()
	if rest, ok := strings.CutPrefix(line, "error "); ok {
		return "", fmt.Errorf("node process %d: %s", q, rest)
	}
	rest, ok := strings.CutPrefix(line, word)
	if !ok {
		return "", fmt.Errorf("node process %d: %q, want %q", q, line, word)
	}
	return strings.TrimSpace(rest), nil
}

// Run starts a node process per node, lets them connect, then tells them
// all to go at once; the time runs until the last one says it is done. The
// CPU time and page faults are the sums of what the nodes report for their
// timed part.
func (pb Procs) Run(ctx context.Context, t Traffic, lio *Local) (_ Sample, err error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if lio != nil && lio.Stage != nil {
		if err := job.DropPageCache(); err != nil {
			return Sample{}, fmt.Errorf("a fetch from disk: %w", err)
		}
	}
	p := len(t)
	procs := make([]*nodeProc, 0, p)
	defer func() {
		if err != nil {
			cancel() // kills the node processes still waiting for a peer
		}
		for _, np := range procs {
			np.in.Close()
			np.cmd.Wait()
		}
	}()
	for q := range p {
		spec := nodeSpec{index: q, host: loopback.IP(q), send: t[q]}
		for src := range p {
			spec.recv = append(spec.recv, t[src][q])
		}
		if lio != nil {
			spec.readPath, spec.readN = lio.Src[q], lio.read[q]
			spec.writePath, spec.writeN = lio.Dst[q], lio.wrote[q]
			if lio.ring != nil {
				spec.ring = *lio.ring
			}
			spec.checked = lio.checked
			if lio.Stage != nil {
				spec.stagePath, spec.fetchAlone = lio.Stage[q], lio.fetchAlone
			}
		}
		np := &nodeProc{cmd: exec.CommandContext(ctx, pb.Self, spec.args()...)}
		np.cmd.Stderr = &np.stderr
		in, err := np.cmd.StdinPipe()
		if err != nil {
			return Sample{}, err
		}
		out, err := np.cmd.StdoutPipe()
		if err != nil {
			return Sample{}, err
		}
		if err := np.cmd.Start(); err != nil {
			return Sample{}, fmt.Errorf("start node process %d: %w", q, err)
		}
		np.in, np.out = in, bufio.NewScanner(out)
		procs = append(procs, np)
	}
	var addrs []string
	for q, np := range procs {
		port, err := np.expect(q, "listening")
		if err != nil {
			return Sample{}, err
		}
		addrs = append(addrs, net.JoinHostPort(loopback.IP(q), port))
	}
	for _, np := range procs {
		fmt.Fprintf(np.in, "peers %s\n", strings.Join(addrs, ","))
	}
	for q, np := range procs {
		if _, err := np.expect(q, "ready"); err != nil {
			return Sample{}, err
		}
	}
	t0 := time.Now()
	for _, np := range procs {
		io.WriteString(np.in, "go\n")
	}
	var s Sample
	var errs []error
	for q, np := range procs {
		rest, err := np.expect(q, "done")
		if err == nil {
			var cpu, faults int64
			if _, err = fmt.Sscan(rest, &cpu, &faults); err == nil {
				s.Used.CPU += time.Duration(cpu)
				s.Used.Faults += faults
			}
		}
		errs = append(errs, err)
	}
	s.Wall = time.Since(t0)
	if lio != nil {
		lio.Clean()
	}
	if err := errors.Join(errs...); err != nil {
		return Sample{}, err
	}
	return s, nil
}

// Measure runs t (with lio, if not nil) once untimed, then rounds
// times, and returns the measured samples.
func Measure(ctx context.Context, r Runner, t Traffic, lio *Local, rounds int) ([]Sample, error) {
	out, err := MeasureEach(ctx, r, t, []*Local{lio}, rounds)
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// MeasureEach is Measure for several ways of running t (one per lio), in
// turn round by round so that they see the same background load; out[i]
// are lios[i]'s samples.
func MeasureEach(ctx context.Context, r Runner, t Traffic, lios []*Local, rounds int) ([][]Sample, error) {
	out := make([][]Sample, len(lios))
	for i := 0; i <= rounds; i++ {
		for k, lio := range lios {
			s, err := r.Run(ctx, t, lio)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				out[k] = append(out[k], s)
			}
		}
	}
	return out, nil
}
