package ocm

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDecodesAreBoundedAcrossTheProcess: however many reads decode at once, at most maxConcurrentDecodes decodes
// run; a read whose context ends while it waits for a slot fails as RegistryUnavailable.
func TestDecodesAreBoundedAcrossTheProcess(t *testing.T) {
	var running, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 * maxConcurrentDecodes {
		wg.Go(func() {
			err := decodeBounded(context.Background(), "ref", "test", func() error {
				n := running.Add(1)
				for m := most.Load(); n > m; m = most.Load() {
					if most.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(20 * time.Millisecond)
				running.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := most.Load(); got != maxConcurrentDecodes {
		t.Errorf("%d decodes ran at once, want %d", got, maxConcurrentDecodes)
	}

	// Every slot taken: a read that cannot wait gives up with a retryable reason.
	release := make(chan struct{})
	for range maxConcurrentDecodes {
		wg.Go(func() { _ = decodeBounded(context.Background(), "ref", "test", func() error { <-release; return nil }) })
	}
	for decodeSlots.TryAcquire(1) { // wait until the holders have their slots
		decodeSlots.Release(1)
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := decodeBounded(ctx, "ref", "test", func() error { return nil }); ReasonOf(err) != ReasonUnavailable {
		t.Errorf("waiting past the context: %v, want %s", err, ReasonUnavailable)
	}
	close(release)
	wg.Wait()
}
