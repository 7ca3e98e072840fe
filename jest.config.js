/** Tests talk HTTP to the real app on a real Temporal server and a real MongoDB-wire database;
 *  scripts/test.mjs starts those and passes their addresses in the environment. */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['@swc/jest', { jsc: { parser: { syntax: 'typescript' }, target: 'es2022' } }] },
  testTimeout: 60000,
  maxWorkers: 2,
};
