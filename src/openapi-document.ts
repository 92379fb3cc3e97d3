/**
 * `node dist/openapi-document.js FILE` writes the OpenAPI document to FILE, built without a database
 * (npm run lint:openapi lints it).
 */
import { writeFileSync } from 'node:fs';
import { openApiWithoutDatabase } from './openapi.js';

const file = process.argv[2];
if (!file) throw new Error('usage: node dist/openapi-document.js FILE');
writeFileSync(file, `${JSON.stringify(await openApiWithoutDatabase(), null, 2)}\n`);
