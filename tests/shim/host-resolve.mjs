// node --import: resolve the rc.8 packages (`@deepseek-ai/*`) the way the DSH loader does at run
// time, from the host install under .host (pnpm hoists every package into .pnpm/node_modules).
import { register } from 'node:module'
import { pathToFileURL } from 'node:url'

const hoisted = new URL('../../.host/dsh/node_modules/.pnpm/', import.meta.url)
register('data:text/javascript,' + encodeURIComponent(`
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@deepseek-ai/')) return next(specifier, { ...context, parentURL: ${JSON.stringify(new URL('index.js', hoisted).href)} })
  return next(specifier, context)
}`), pathToFileURL('./'))
