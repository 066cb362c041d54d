/* never guesses: the validator waits, the submission burns its CPU time */
int main(void) { volatile unsigned long n = 0; for (;;) n++; }
