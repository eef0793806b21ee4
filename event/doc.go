// Package event holds the vocabulary every part of hookgate shares about a
// stored webhook: the Hookgate-* header names, the encoding of outside
// values into NATS subject and KV tokens, and the AUDIT record. It imports
// nothing from the project, so the gateway, the consumer and the CLI agree
// on it without depending on each other.
package event
