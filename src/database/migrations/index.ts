import { Foundation1763683200000 } from './1763683200000-foundation.js';
import { Definitions1763683300000 } from './1763683300000-definitions.js';
import { Workers1763683600000 } from './1763683600000-workers.js';

/** Every migration, oldest first. A schema change is a new file here, never an edit of an old one. */
export const MIGRATIONS = [Foundation1763683200000, Definitions1763683300000, Workers1763683600000];
