/**
 * Whether the server at a PostgreSQL URL asks for a password (the URL carries one; the embedded
 * server's always does). A test of a connection cut in its first moments needs one that trusts it.
 */
export const asksPassword = (url: string): boolean => new URL(url).password !== '';
