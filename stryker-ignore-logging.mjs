// A Stryker ignorer (stryker.config.mjs): mutants inside logger calls (log.info(...), alog.warn(...),
// ctx.log.child({...}), ...) are not generated. Log lines and their fields are for operators, not
// behaviour the unit tests assert (the tests run with a silent logger), so such mutants could only
// survive as noise; errors returned to callers and journaled texts are still mutated.

import { PluginKind, declareValuePlugin } from '@stryker-mutator/api/plugin';

const LOG_METHODS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'child']);

/** `log`, `alog`, `ctx.log`, `this.d.log`, ...: an identifier or member named like a logger. */
function isLogger(node) {
  if (node.type === 'Identifier') return /^a?log$/.test(node.name);
  if (node.type === 'MemberExpression' && !node.computed) return node.property.name === 'log';
  return false;
}

export const strykerPlugins = [
  declareValuePlugin(PluginKind.Ignore, 'LogCalls', {
    shouldIgnore(path) {
      const n = path.node;
      if (
        n.type === 'CallExpression' &&
        n.callee.type === 'MemberExpression' &&
        !n.callee.computed &&
        LOG_METHODS.has(n.callee.property.name) &&
        isLogger(n.callee.object)
      ) {
        return 'a logger call: log text and fields are not asserted behaviour';
      }
      return undefined;
    },
  }),
];
