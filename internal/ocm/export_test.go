package ocm

// CachedBytes returns the bytes the vector and artifact caches retain, as they count them.
func (c *Client) CachedBytes() (vectors, artifacts int64) {
	return c.vectors.retainedBytes(), c.artifacts.retainedBytes()
}

// CloseIdleConnections closes the registry connections the client keeps open, so that a measurement of the heap
// the client retains does not count their buffers.
func (c *Client) CloseIdleConnections() { c.http.CloseIdleConnections() }

func (c *lru[V]) retainedBytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
