package peer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// aLongTimeAgo is a deadline in the past: setting it makes blocked I/O
// return at once, which is how a cancelled ctx unblocks a conn.
var aLongTimeAgo = time.Unix(1, 0)

// dial connects to node to at addr and authenticates for purpose p. The
// returned frameConn is tracked by the Node (shutdown closes it); the caller
// must untrack it when done.
func (n *Node) dial(ctx context.Context, to int, addr string, p purpose, stream string) (*frameConn, error) {
	d := net.Dialer{Timeout: n.cfg.DialTimeout}
	if n.localIP != nil {
		d.LocalAddr = &net.TCPAddr{IP: n.localIP}
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil && d.LocalAddr != nil &&
		(errors.Is(err, syscall.EADDRNOTAVAIL) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENETUNREACH)) {
		// The peer is not reachable from our listening address's
		// interface; let the kernel pick the source.
		d.LocalAddr = nil
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fmt.Errorf("dial node %d at %s: %w", to, addr, err)
	}
	tc := c.(*net.TCPConn)
	if !n.track(tc) {
		return nil, ErrClosed
	}
	fc, err := n.clientHandshake(ctx, tc, to, addr, p, stream)
	if err != nil {
		n.untrack(tc)
		if n.isClosed() {
			return nil, ErrClosed
		}
		return nil, err
	}
	return fc, nil
}

// clientHandshake runs the client side of the handshake on a fresh
// connection (see the package comment). It returns a *RefusedError when the
// server refuses us, and ErrAuth when the server accepted us without
// proving the secret.
func (n *Node) clientHandshake(ctx context.Context, c *net.TCPConn, to int, addr string, p purpose, stream string) (*frameConn, error) {
	fc := newFrameConn(c, n.cfg.IOTimeout)
	deadline := time.Now().Add(n.cfg.IOTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(aLongTimeAgo) })
	defer stop()

	fail := func(step string, err error) error {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return fmt.Errorf("handshake with node %d at %s: %s: %w", to, addr, step, err)
	}

	n.mu.Lock()
	self := n.addrs[n.cfg.Self]
	n.mu.Unlock()
	h := hello{
		version: protocolVersion,
		purpose: p,
		from:    uint32(n.cfg.Self),
		to:      uint32(to),
		job:     n.cfg.Job,
		addr:    self,
		stream:  stream,
		terms:   n.cfg.Terms,
	}
	if _, err := rand.Read(h.nonce[:]); err != nil {
		return nil, fmt.Errorf("handshake with node %d: nonce: %w", to, err)
	}
	hb := appendHello(nil, &h)
	if _, err := fc.writeFrameLocked(ftHello, 0, hb); err != nil {
		return nil, fail("send hello", err)
	}

	hdr, msg, err := fc.readFrameNoDeadline()
	if err != nil {
		return nil, fail("read challenge", err)
	}
	if hdr.typ == ftVerdict {
		return nil, n.refusedBy(to, addr, msg)
	}
	if hdr.typ != ftChallenge || len(msg) != nonceLen+macLen {
		return nil, fail("read challenge", fmt.Errorf("%w: unexpected %s frame of %d bytes", ErrBadFrame, hdr.typ, len(msg)))
	}
	nonceS, serverMAC := msg[:nonceLen], msg[nonceLen:]
	// The proof goes out even if the server's MAC is wrong: a server with
	// another secret then refuses it and logs the failure too. The proof is
	// bound to our fresh nonce_c, so it is useless to anyone else.
	serverOK := hmac.Equal(serverMAC, transcriptMAC(n.cfg.Secret, roleServer, hb, nonceS))
	if _, err := fc.writeFrameLocked(ftProof, 0, transcriptMAC(n.cfg.Secret, roleClient, hb, nonceS)); err != nil {
		return nil, fail("send proof", err)
	}
	hdr, msg, err = fc.readFrameNoDeadline()
	if err != nil {
		return nil, fail("read verdict", err)
	}
	if hdr.typ != ftVerdict || len(msg) == 0 {
		return nil, fail("read verdict", fmt.Errorf("%w: unexpected %s frame of %d bytes", ErrBadFrame, hdr.typ, len(msg)))
	}
	if msg[0] != verdictAccept {
		return nil, n.refusedBy(to, addr, msg)
	}
	if !serverOK {
		n.met.authFail.WithLabelValues("secret").Inc()
		return nil, fmt.Errorf("node %d at %s accepted us without proving the job secret: %w", to, addr, ErrAuth)
	}
	if !stop() {
		return nil, fail("accepted", ctx.Err())
	}
	_ = c.SetDeadline(time.Time{})
	fc.maxLen = n.cfg.MaxFrame
	return fc, nil
}

// readFrameNoDeadline reads a frame under the deadline already set.
func (fc *frameConn) readFrameNoDeadline() (header, []byte, error) {
	h, err := fc.readHeader()
	if err != nil {
		return header{}, nil, err
	}
	p, err := fc.readPayload(h, nil)
	return h, p, err
}

// refusedBy turns a refusal verdict into a *RefusedError and counts it.
func (n *Node) refusedBy(to int, addr string, msg []byte) error {
	e := &RefusedError{Peer: to, Addr: addr, Code: refuseAuth, Reason: "refused without a reason"}
	if len(msg) > 0 {
		e.Code = msg[0]
		if len(msg) > 1 {
			e.Reason = sanitize(msg[1:])
		}
	}
	if r := authFailureReason(e.Code); r != "" {
		n.met.authFail.WithLabelValues(r).Inc()
	}
	return e
}

// sanitize makes text from an unauthenticated peer safe to log: valid UTF-8,
// no control characters, bounded length.
func sanitize(b []byte) string {
	if len(b) > maxVerdictText {
		b = b[:maxVerdictText]
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, strings.ToValidUTF8(string(b), "?"))
}

// serveConn runs the server side of the handshake on an accepted connection,
// then hands it to the link or stream code. It owns c and the handshake
// slot acquired for host.
func (n *Node) serveConn(c *net.TCPConn, host string) {
	handedOff := false
	released := false
	release := func() {
		if !released {
			released = true
			n.hs.release(host)
		}
	}
	defer func() {
		release()
		if !handedOff {
			n.untrack(c)
		}
	}()
	remote := c.RemoteAddr().String()
	fc := newFrameConn(c, n.cfg.IOTimeout)
	// One deadline for the whole handshake: a client that trickles bytes
	// cannot hold the slot longer than IOTimeout.
	_ = c.SetDeadline(time.Now().Add(n.cfg.IOTimeout))

	hdr, msg, err := fc.readFrameNoDeadline()
	if err == nil && hdr.typ != ftHello {
		err = fmt.Errorf("%w: expected a hello, got a %s frame", ErrBadFrame, hdr.typ)
	}
	if err != nil {
		n.dropBeforeAuth(remote, "reading hello", err)
		return
	}
	h, err := parseHello(msg)
	if errors.Is(err, ErrVersion) {
		n.met.authFail.WithLabelValues("version").Inc()
		n.refused.note("version/"+host, "version", host,
			fmt.Sprintf("refused connection from %s: protocol version %d not supported (we speak %d)", remote, h.version, protocolVersion),
			"remote", remote, "reason", "version")
		n.sendVerdict(fc, refuseVersion, fmt.Sprintf("protocol version %d not supported (node speaks %d)", h.version, protocolVersion))
		return
	}
	if err != nil {
		n.dropBeforeAuth(remote, "parsing hello", err)
		return
	}
	from := int(h.from)
	refuse := func(code uint8, logText, peerText string) {
		reason := authFailureReason(code)
		if reason == "" {
			reason = dropBusy
		}
		n.refused.note(fmt.Sprintf("%d/%d", from, code), reason, host,
			fmt.Sprintf("refused connection from %s claiming node %d: %s", remote, from, logText),
			"remote", remote, "peer", from, "reason", authFailureReason(code))
		if r := authFailureReason(code); r != "" {
			n.met.authFail.WithLabelValues(r).Inc()
		} else {
			n.met.dropped.WithLabelValues(dropBusy).Inc()
		}
		n.sendVerdict(fc, code, peerText)
	}
	switch {
	case h.job != n.cfg.Job:
		refuse(refuseJob, fmt.Sprintf("job %q is not our job %q", h.job, n.cfg.Job),
			fmt.Sprintf("job %q is not this node's job", h.job))
		return
	case int(h.to) != n.cfg.Self:
		refuse(refuseNode, fmt.Sprintf("it dialled node %d but we are node %d", h.to, n.cfg.Self),
			fmt.Sprintf("this is node %d, not node %d", n.cfg.Self, h.to))
		return
	case from >= len(n.cfg.Addrs) || from == n.cfg.Self:
		refuse(refuseNode, fmt.Sprintf("node %d is not a peer in this job of %d nodes", from, len(n.cfg.Addrs)),
			fmt.Sprintf("node %d is not a peer in this job of %d nodes", from, len(n.cfg.Addrs)))
		return
	case h.addr != "" && checkAddr(h.addr) != nil:
		refuse(refuseNode, fmt.Sprintf("advertised address %q is not host:port", h.addr),
			fmt.Sprintf("advertised address %q is not host:port", h.addr))
		return
	}

	var nonceS [nonceLen]byte
	if _, err := rand.Read(nonceS[:]); err != nil {
		n.log.Error("handshake nonce", "err", err)
		return
	}
	if _, err := fc.writeFrameLocked(ftChallenge, 0, nonceS[:], transcriptMAC(n.cfg.Secret, roleServer, msg, nonceS[:])); err != nil {
		n.dropBeforeAuth(remote, "sending challenge", err)
		return
	}
	hdr, proof, err := fc.readFrameNoDeadline()
	if err == nil && (hdr.typ != ftProof || len(proof) != macLen) {
		err = fmt.Errorf("%w: expected a %d-byte proof, got a %s frame of %d bytes", ErrBadFrame, macLen, hdr.typ, len(proof))
	}
	if err != nil {
		n.dropBeforeAuth(remote, "reading proof", err)
		return
	}
	if !hmac.Equal(proof, transcriptMAC(n.cfg.Secret, roleClient, msg, nonceS[:])) {
		refuse(refuseAuth, ErrAuth.Error(), ErrAuth.Error())
		return
	}
	// Only a node that proved it holds the secret learns our terms.
	if h.terms != n.cfg.Terms {
		why := fmt.Sprintf("node %d runs the job with %q, this node with %q", from, h.terms, n.cfg.Terms)
		refuse(refuseTerms, why, why)
		return
	}
	if h.purpose == purposeStream {
		if code, why := n.streamRoom(streamKey{from, h.stream}); code != verdictAccept {
			refuse(code, why, why)
			return
		}
	}
	if _, err := fc.writeFrameLocked(ftVerdict, 0, []byte{verdictAccept}); err != nil {
		n.dropBeforeAuth(remote, "sending verdict", err)
		return
	}
	_ = c.SetDeadline(time.Time{})
	fc.maxLen = n.cfg.MaxFrame
	release()
	if h.addr != "" {
		n.setAddr(from, h.addr)
	}
	handedOff = true
	switch h.purpose {
	case purposeLink:
		n.serveInLink(fc, from)
	case purposeStream:
		n.offerStream(fc, from, h.stream)
	}
}

// sendVerdict sends a refusal; the connection is closed right after, so a
// write error changes nothing.
func (n *Node) sendVerdict(fc *frameConn, code uint8, text string) {
	if len(text) > maxVerdictText {
		text = text[:maxVerdictText]
	}
	_, _ = fc.writeFrame(ftVerdict, 0, []byte{code}, []byte(text))
}

// dropBeforeAuth logs and counts a connection dropped during the handshake.
func (n *Node) dropBeforeAuth(remote, step string, err error) {
	host, _, _ := net.SplitHostPort(remote)
	if errors.Is(err, io.EOF) {
		// Closed before sending a byte: a port probe, not worth a line
		// of its own, but a flood of them shows in the summary.
		n.refused.count("probe", host)
		return
	}
	reason := dropReason(err)
	n.met.dropped.WithLabelValues(reason).Inc()
	n.refused.note("drop/"+reason+"/"+host, reason, host,
		fmt.Sprintf("dropped connection from %s before authentication (%s): %v", remote, step, explain(err, n.cfg.IOTimeout)),
		"remote", remote, "reason", reason)
}

// remoteHost is the IP of c's peer, a low-cardinality rate-limit key.
func remoteHost(c net.Conn) string {
	host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	return host
}

// dropReason classifies err for scrfs_peer_dropped_total.
func dropReason(err error) string {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return dropTimeout
	case errors.Is(err, ErrFrameTooLarge):
		return dropOversize
	}
	return dropGarbage
}

// explain rewords deadline errors for a human.
func explain(err error, timeout time.Duration) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("timed out after %v (IOTimeout): %w", timeout, err)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("connection closed mid-frame: %w", err)
	}
	return err
}
