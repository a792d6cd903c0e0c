"""OfficeQA: questions about U.S. Treasury Bulletins answered from a document corpus with tools."""
