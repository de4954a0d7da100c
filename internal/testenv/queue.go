package testenv

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Queue observes a controller's work queue, so that a test can tell when the reconciler has processed every
// request it was given for an object, instead of sleeping for as long as that usually takes: nothing is queued,
// nothing is being reconciled and no requeue is scheduled. Once an object is idle, its reconciler does nothing
// more until something changes. Set a controller's options' NewQueue to New; the queue is client-go's
// rate-limited queue, as controller-runtime builds it, with the observation around its parts.
type Queue struct {
	mu   sync.Mutex
	cond *sync.Cond
	// queued: in the queue or, while reconciled, added again (client-go's dirty set).
	queued     map[reconcile.Request]bool
	processing map[reconcile.Request]bool
	// scheduled: the earliest time a requeue asked for is due, until it has been added.
	scheduled map[reconcile.Request]time.Time
}

// New builds the queue of a controller; it is a controller.Options NewQueue. One Queue observes one controller.
func (q *Queue) New(name string, limiter workqueue.TypedRateLimiter[reconcile.Request]) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	q.mu.Lock()
	q.cond = sync.NewCond(&q.mu)
	q.queued = map[reconcile.Request]bool{}
	q.processing = map[reconcile.Request]bool{}
	q.scheduled = map[reconcile.Request]time.Time{}
	q.mu.Unlock()
	fifo := &observedFIFO{TypedInterface: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: name}), q: q}
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{Name: name, Queue: fifo})
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{
		Name:          name,
		DelayingQueue: observedDelaying{TypedDelayingInterface: delaying, q: q},
	})
}

// Idle tells whether the controller has nothing queued, in progress or scheduled for the object.
func (q *Queue) Idle(key client.ObjectKey) bool {
	req := reconcile.Request{NamespacedName: key}
	q.mu.Lock()
	defer q.mu.Unlock()
	_, scheduled := q.scheduled[req]
	return !q.queued[req] && !q.processing[req] && !scheduled
}

// observedDelaying records the requeues a reconciler asks for (RequeueAfter, and the backoff after an error).
type observedDelaying struct {
	workqueue.TypedDelayingInterface[reconcile.Request]
	q *Queue
}

func (d observedDelaying) AddAfter(req reconcile.Request, after time.Duration) {
	if after > 0 {
		// Before the queue's timer can fire: the add that fires it clears the record.
		due := time.Now().Add(after)
		d.q.mu.Lock()
		if at, ok := d.q.scheduled[req]; !ok || due.Before(at) {
			d.q.scheduled[req] = due
		}
		d.q.mu.Unlock()
	}
	d.TypedDelayingInterface.AddAfter(req, after)
}

// observedFIFO is the queue proper, under both the direct adds and those of requeues that came due. Each of its
// calls and the bookkeeping of it happen under one lock; Get waits for an item under that lock too, so that it
// takes one only when it is there and never blocks the others.
type observedFIFO struct {
	workqueue.TypedInterface[reconcile.Request]
	q *Queue
}

func (f *observedFIFO) Add(req reconcile.Request) {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	f.TypedInterface.Add(req)
	q.queued[req] = true
	if at, ok := q.scheduled[req]; ok && !time.Now().Before(at) {
		delete(q.scheduled, req)
	}
	q.cond.Broadcast()
}

func (f *observedFIFO) Get() (reconcile.Request, bool) {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	for f.Len() == 0 && !f.ShuttingDown() {
		q.cond.Wait()
	}
	req, shutdown := f.TypedInterface.Get() // an item is there, or the queue is shutting down: returns at once
	if shutdown {
		return req, shutdown
	}
	delete(q.queued, req)
	q.processing[req] = true
	return req, false
}

func (f *observedFIFO) Done(req reconcile.Request) {
	q := f.q
	q.mu.Lock()
	defer q.mu.Unlock()
	f.TypedInterface.Done(req)
	delete(q.processing, req)
	q.cond.Broadcast()
}

func (f *observedFIFO) ShutDown() {
	f.TypedInterface.ShutDown()
	f.wake()
}

func (f *observedFIFO) ShutDownWithDrain() {
	f.TypedInterface.ShutDownWithDrain() // waits for the items in progress, whose Done wakes the getters
	f.wake()
}

func (f *observedFIFO) wake() {
	f.q.mu.Lock()
	f.q.cond.Broadcast()
	f.q.mu.Unlock()
}
