import { Foundation1763683200000 } from './1763683200000-foundation.js';

/** Every migration, oldest first. A schema change is a new file here, never an edit of an old one. */
export const MIGRATIONS = [Foundation1763683200000];
