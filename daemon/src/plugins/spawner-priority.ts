// The spawner's first import (spawner-child.ts): it is forked at stewardd's own priority (--nice,
// priority.ts) and goes back to the one stewardd was started with before anything else of it
// loads, so its loading, and every plugin it starts, run at the node's priority, not stewardd's.

import { restoreBasePriority } from '../priority.js';

restoreBasePriority();
