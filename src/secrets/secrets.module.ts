import { Module } from '@nestjs/common';
import { CONFIG, type Config } from '../config/config.js';
import { McpCredentials } from './mcp-credentials.js';
import { SecretCipher } from './secret-cipher.js';
import { loadSecretsKey } from './secrets-key.js';
import { SecretsRepository } from './secrets.repository.js';
import { SecretsService } from './secrets.service.js';
import { UrlSigner } from './url-signer.js';

@Module({
  providers: [
    {
      provide: SecretCipher,
      inject: [CONFIG],
      useFactory: (config: Config) => new SecretCipher(loadSecretsKey(config)),
    },
    {
      provide: McpCredentials,
      inject: [SecretCipher],
      useFactory: (cipher: SecretCipher) => new McpCredentials(cipher),
    },
    SecretsRepository,
    SecretsService,
    {
      provide: UrlSigner,
      inject: [CONFIG],
      useFactory: (config: Config) => new UrlSigner(loadSecretsKey(config)),
    },
  ],
  exports: [SecretsService, McpCredentials, SecretCipher, UrlSigner],
})
export class SecretsModule {}
