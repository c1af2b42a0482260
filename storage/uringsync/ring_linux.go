package uringsync

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The kernel's ABI (include/uapi/linux/io_uring.h), the parts used here.
const (
	opFsync         = 3          // IORING_OP_FSYNC
	fsyncDatasync   = 1          // IORING_FSYNC_DATASYNC
	offSQRing       = 0          // IORING_OFF_SQ_RING
	offSQEs         = 0x10000000 // IORING_OFF_SQES
	featSingleMmap  = 1 << 0     // IORING_FEAT_SINGLE_MMAP
	registerEventfd = 4          // IORING_REGISTER_EVENTFD
	sqeSize         = 64
	cqeSize         = 16
)

// params is struct io_uring_params.
type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  struct {
		head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
		userAddr                                                        uint64
	}
	cqOff struct {
		head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
		userAddr                                                        uint64
	}
}

// sqe is struct io_uring_sqe as an fsync fills it.
type sqe struct {
	opcode     uint8
	flags      uint8
	ioprio     uint16
	fd         int32
	off        uint64
	addr       uint64
	len        uint32
	fsyncFlags uint32
	userData   uint64
	_          [24]byte
}

// cqe is struct io_uring_cqe.
type cqe struct {
	userData uint64
	res      int32
	flags    uint32
}

// entries bounds the syncs in flight: a WAL, a manifest and a few
// compactions' tables at most, so a waiter beyond it is a bug's symptom
// rather than load.
const entries = 64

// ring submits fsyncs to the kernel and hands each completion to the
// goroutine waiting for it. Submissions are serialised by mu; completions
// are read by one goroutine that sleeps on an eventfd in Go's netpoller,
// so no thread blocks in the kernel while a disk syncs.
type ring struct {
	fd      int
	mem     []byte // the SQ and CQ rings (one mapping)
	sqeMem  []byte
	sqHead  *uint32
	sqTail  *uint32
	sqMask  uint32
	sqArray unsafe.Pointer
	cqHead  *uint32
	cqTail  *uint32
	cqMask  uint32
	cqes    unsafe.Pointer
	efd     *os.File // eventfd the kernel signals on each completion

	slots chan struct{} // one token per sync in flight (entries)

	mu      sync.Mutex
	waiters map[uint64]chan error
	next    uint64
	closed  bool
	done    chan struct{} // closed when the reaper has returned
}

// newRing sets up a ring, or says why the kernel refuses one.
func newRing() (*ring, error) {
	var p params
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, entries, uintptr(unsafe.Pointer(&p)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r := &ring{fd: int(fd), waiters: make(map[uint64]chan error), slots: make(chan struct{}, entries), done: make(chan struct{})}
	if p.features&featSingleMmap == 0 {
		_ = unix.Close(r.fd)
		return nil, errors.New("io_uring: kernel too old (no single mmap)")
	}
	size := max(p.sqOff.array+p.sqEntries*4, p.cqOff.cqes+p.cqEntries*cqeSize)
	var err error
	if r.mem, err = unix.Mmap(r.fd, offSQRing, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		_ = unix.Close(r.fd)
		return nil, fmt.Errorf("io_uring mmap rings: %w", err)
	}
	if r.sqeMem, err = unix.Mmap(r.fd, offSQEs, int(p.sqEntries*sqeSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.unmap()
		return nil, fmt.Errorf("io_uring mmap entries: %w", err)
	}
	at := func(off uint32) unsafe.Pointer { return unsafe.Pointer(&r.mem[off]) }
	r.sqHead, r.sqTail = (*uint32)(at(p.sqOff.head)), (*uint32)(at(p.sqOff.tail))
	r.sqMask, r.sqArray = *(*uint32)(at(p.sqOff.ringMask)), at(p.sqOff.array)
	r.cqHead, r.cqTail = (*uint32)(at(p.cqOff.head)), (*uint32)(at(p.cqOff.tail))
	r.cqMask, r.cqes = *(*uint32)(at(p.cqOff.ringMask)), at(p.cqOff.cqes)

	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		r.unmap()
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	fd32 := int32(efd)
	if _, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerEventfd, uintptr(unsafe.Pointer(&fd32)), 1, 0, 0); errno != 0 {
		_ = unix.Close(efd)
		r.unmap()
		return nil, fmt.Errorf("io_uring register eventfd: %w", errno)
	}
	// A non-blocking descriptor makes os.File use the netpoller: the
	// reaper's Read parks its goroutine instead of a thread.
	r.efd = os.NewFile(uintptr(efd), "io_uring-eventfd")
	go r.reap()
	return r, nil
}

func (r *ring) unmap() {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
	}
	_ = unix.Munmap(r.mem)
	_ = unix.Close(r.fd)
}

// fsync syncs fd (its data only if datasync) and returns the kernel's
// result, as fsync(2) or fdatasync(2) would.
func (r *ring) fsync(fd uintptr, datasync bool) error {
	r.slots <- struct{}{}
	defer func() { <-r.slots }()
	reply := make(chan error, 1)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return os.ErrClosed
	}
	r.next++
	id := r.next
	tail := atomic.LoadUint32(r.sqTail)
	idx := tail & r.sqMask
	e := (*sqe)(unsafe.Pointer(&r.sqeMem[idx*sqeSize]))
	*e = sqe{opcode: opFsync, fd: int32(fd), userData: id}
	if datasync {
		e.fsyncFlags = fsyncDatasync
	}
	*(*uint32)(unsafe.Add(r.sqArray, idx*4)) = idx
	atomic.StoreUint32(r.sqTail, tail+1)
	r.waiters[id] = reply
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), 1, 0, 0, 0, 0)
	if errno != 0 {
		// Not consumed: take it back so the next submission reuses the slot.
		if atomic.LoadUint32(r.sqHead) == tail {
			atomic.StoreUint32(r.sqTail, tail)
		}
		delete(r.waiters, id)
		r.mu.Unlock()
		return fmt.Errorf("io_uring_enter: %w", errno)
	}
	r.mu.Unlock()
	return <-reply
}

// reap hands each completion to its waiter; it returns when close closes
// the eventfd.
func (r *ring) reap() {
	defer close(r.done)
	var buf [8]byte
	for {
		r.mu.Lock()
		for head := atomic.LoadUint32(r.cqHead); head != atomic.LoadUint32(r.cqTail); head++ {
			c := (*cqe)(unsafe.Add(r.cqes, (head&r.cqMask)*cqeSize))
			var err error
			if c.res < 0 {
				err = syscall.Errno(-c.res)
			}
			if w, ok := r.waiters[c.userData]; ok {
				w <- err
				delete(r.waiters, c.userData)
			}
			atomic.StoreUint32(r.cqHead, head+1)
		}
		r.mu.Unlock()
		if _, err := r.efd.Read(buf[:]); err != nil {
			return
		}
	}
}

// close stops the ring once no sync is in flight.
func (r *ring) close() error {
	for range entries {
		r.slots <- struct{}{} // every slot: nothing is in flight
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	err := r.efd.Close()
	<-r.done
	r.unmap()
	return err
}
