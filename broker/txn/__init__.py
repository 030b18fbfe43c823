"""Transactions: the transaction coordinator and the records of `__transaction_state`."""
