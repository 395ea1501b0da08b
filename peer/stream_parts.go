package peer

import "context"

// RecvParts reads the next frame. If its payload is exactly n bytes and
// fits buf, it is read into buf[:n] and fn(lo, hi) is called each time
// bytes [lo, hi) of it have landed: the first from bytes, then part bytes
// at a time, in order, so the caller can work on each part while the
// kernel's copy of it is still in the core's cache (an XOR step XORs its
// contribution into the partial sum it is receiving). Any other frame is
// returned whole, as Recv returns it, and fn is not called. An error from
// fn fails the receive and breaks the stream, as a failed read does.
func (s *Stream) RecvParts(ctx context.Context, buf []byte, n, from, part int, fn func(lo, hi int) error) ([]byte, error) {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	h, err := s.recvHeaderLocked(ctx)
	if err != nil {
		return nil, err
	}
	if int(h.length) != n || cap(buf) < n || from <= 0 || part <= 0 {
		return s.recvPayloadLocked(ctx, h, buf)
	}
	buf = buf[:n]
	for lo := 0; lo < n; {
		hi := from
		if lo >= from {
			hi = lo + part
		}
		hi = min(hi, n)
		err := s.readBulk(buf[lo:hi], n-lo)
		if err == nil {
			err = fn(lo, hi)
		}
		if err != nil {
			s.waitFor(0)
			return nil, s.fail(&s.rerr, "recv", s.cause(ctx, &s.rw, err), true)
		}
		lo = hi
	}
	s.waitFor(0)
	s.pc.received.Add(float64(headerLen + n))
	return buf, nil
}
