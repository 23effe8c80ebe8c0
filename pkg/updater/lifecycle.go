package updater

import (
	"context"
	"fmt"

	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// A controller that works some shards of namespaces (pkg/shard) lives
// beside the controllers of the other spans of shards its replica holds,
// and is stopped when its span changes: it shares the informers that stay
// whole (nodes, the pods bound to nodes, namespaces, the kill switch) with
// them, and every write it sends for a namespace passes its shard's fence.

// Fence lets a write for a namespace through only while this replica holds
// the namespace's shard (pkg/shard/owner.Owner.Guard): it returns the
// context to send it with and the function to call once it is answered, or
// an error, and then nothing may be sent.
type Fence interface {
	Guard(ctx context.Context, namespace string) (context.Context, func(), error)
}

// fenced passes a write for namespace through the fence; without one,
// every write goes.
func (c *Controller) fenced(ctx context.Context, namespace string) (context.Context, func(), error) {
	if c.fence == nil {
		return ctx, func() {}, nil
	}
	wctx, done, err := c.fence.Guard(ctx, namespace)
	if err != nil {
		c.metrics.WithheldResize(withheldShard)
		return nil, nil, fmt.Errorf("not sent: %w", err)
	}
	return wctx, done, nil
}

// withheldShard is the reason of a resize withheld because its shard is
// not held (any more, or for long enough).
const withheldShard = "ShardNotHeld"

// queueMetrics is the metrics provider of the queue named queue: nil, the
// library's default (none), without Deps.QueueMetrics.
func (d Deps) queueMetrics(queue string) workqueue.MetricsProvider {
	if d.QueueMetrics == nil {
		return nil
	}
	return d.QueueMetrics(queue)
}

// handlerRegistration is an event handler the controller added.
type handlerRegistration struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration
}

// handle adds h to informer, to be removed by Close.
func (c *Controller) handle(informer cache.SharedIndexInformer, h cache.ResourceEventHandler) error {
	reg, err := informer.AddEventHandler(h)
	if err != nil {
		return err
	}
	c.handlers = append(c.handlers, handlerRegistration{informer: informer, handle: reg})
	return nil
}

// addIndexers adds to informer the indexers it does not have yet: an
// informer shared by several controllers gets them from the first.
func addIndexers(informer cache.SharedIndexInformer, indexers cache.Indexers) error {
	existing := informer.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, f := range indexers {
		if _, ok := existing[name]; !ok {
			missing[name] = f
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return informer.AddIndexers(missing)
}

// Close removes the controller's event handlers from the informers, which
// may outlive it, and its gauges from the metrics, and shuts its queues down
// (their metrics with them). Call it once Run has returned (or when Run was
// never called).
func (c *Controller) Close() {
	c.shutDownQueues()
	for _, h := range c.handlers {
		_ = h.informer.RemoveEventHandler(h.handle)
	}
	c.handlers = nil
	if c.unbind != nil {
		c.unbind()
	}
	if c.unsubscribe != nil {
		c.unsubscribe()
		c.unsubscribe = nil
	}
}

// Working tells whether Run has synced the caches, loaded the records and
// started its workers.
func (c *Controller) Working() bool {
	return c.started.Load()
}
