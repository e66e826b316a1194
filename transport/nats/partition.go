package nats

import (
	"hash/fnv"
	"strconv"
)

// Partition returns the partition of a partition key among n: the 32-bit
// FNV-1a hash of the key's bytes modulo n. It is deterministic across
// processes, platforms and versions, so every publisher of a key uses the
// same subject.
func Partition(key string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(n))
}

// Subject returns the subject a message of partition key key is published
// to: prefix.<Partition(key, partitions)>.
func Subject(prefix, key string, partitions int) string {
	return prefix + "." + strconv.Itoa(Partition(key, partitions))
}
